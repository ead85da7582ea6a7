"""Deleting what an installation no longer needs: old, archived or one scope's threads, and
files no message refers to. The function behind ``manage.py pai_purge``.

A thread goes with everything in it (runs, steps, attempts, messages, queue items, pending
actions, its files and their stored bytes, after commit), one thread per transaction under
the thread lock, as ``services.delete_thread`` does. A thread whose run is active is never
deleted under it: without ``cancel_active`` it is skipped with a reason; with it, a queued or
waiting run is cancelled through the runtime (``cancel_locked``: pending actions cancelled,
tool calls settled, ``run_finished`` observed) and the thread deleted, and a running run is
asked to stop and the thread skipped until a later purge finds it ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from pai_agents.messages.file_refs import FILE_REF_PART
from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import thread_deleted
from pai_threads.models import File, Message, QueueItem, Run, Thread
from pai_threads.services.cancelling import cancel_locked
from pai_threads.store.admission import lock_thread

__all__ = ["PurgeError", "PurgeReport", "PurgedFile", "PurgedThread", "purge"]

# An upload is an orphan only once it had time to be sent: younger files are kept.
ORPHAN_GRACE = timedelta(hours=24)


class PurgeError(ValueError):
    """The criteria select nothing safely (no criterion, a negative age)."""


@dataclass(frozen=True, slots=True)
class PurgedThread:
    id: str
    scope: str
    agent: str
    archived: bool
    last_activity: datetime

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scope": self.scope,
            "agent": self.agent,
            "archived": self.archived,
            "lastActivity": self.last_activity.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class PurgedFile:
    id: str
    scope: str
    byte_size: int
    storage_name: str

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "scope": self.scope, "byteSize": self.byte_size}


@dataclass(slots=True)
class PurgeReport:
    """What went (or, on a dry run, would go), and each thread kept with its reason."""

    dry_run: bool
    threads: list[PurgedThread] = field(default_factory=list)
    files: list[PurgedFile] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    cancelled_runs: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "threads": [t.as_json() for t in self.threads],
            "files": [f.as_json() for f in self.files],
            "bytes": sum(f.byte_size for f in self.files),
            "skipped": [{"id": i, "reason": r} for i, r in self.skipped.items()],
            "cancelledRuns": self.cancelled_runs,
        }


def _selected(
    older_than: timedelta | None, archived: bool, scope: str | None, now: datetime
) -> QuerySet[Thread]:
    threads = Thread.objects.all()
    if older_than is not None:
        cutoff = now - older_than
        # Last activity: the thread's own updates (sends touch it) and its runs' ends.
        recent = Run.objects.filter(thread=OuterRef("pk")).filter(
            Q(created_at__gte=cutoff) | Q(finished_at__gte=cutoff)
        )
        threads = threads.filter(updated_at__lt=cutoff).exclude(Exists(recent))
    if archived:
        threads = threads.filter(archived=True)
    if scope is not None:
        threads = threads.filter(scope_key=scope)
    return threads.order_by("updated_at", "id")


def _last_activity(thread: Thread) -> datetime:
    ends = [
        moment
        for pair in Run.objects.filter(thread=thread).values_list("created_at", "finished_at")
        for moment in pair
        if moment is not None
    ]
    return max([thread.updated_at, *ends])


def _purge_thread(thread: Thread, report: PurgeReport, cancel_active: bool) -> None:
    """One thread in its own transaction, under the thread lock (sends and run ends wait)."""
    with transaction.atomic():
        lock_thread(thread.id)
        active = Run.objects.active().select_for_update().filter(thread=thread).first()
        if active is not None and not cancel_active:
            report.skipped[thread.id] = f"run {active.id} is {active.status}"
            return
        if active is not None and active.status == Run.Status.RUNNING:
            report.skipped[thread.id] = f"run {active.id} is running"
            if not report.dry_run:
                cancel_locked(active)  # asks the execution to stop; a later purge deletes
                report.cancelled_runs.append(active.id)
            return
        entry = PurgedThread(
            thread.id, thread.scope_key, thread.agent_name, thread.archived, _last_activity(thread)
        )
        report.threads.append(entry)
        if report.dry_run:
            return
        if active is not None:
            # Nothing queued behind it may be admitted: the thread goes with its queue.
            QueueItem.objects.filter(thread=thread, status=QueueItem.Status.QUEUED).update(
                status=QueueItem.Status.CANCELLED
            )
            cancel_locked(active)
            report.cancelled_runs.append(active.id)
        # The File rows' post_delete handler deletes their stored bytes after commit.
        Thread.objects.filter(pk=thread.pk).delete()
        publish_after_commit(thread.id, [thread_deleted(thread.id)])


def _orphans(scope: str | None, now: datetime, grace: timedelta) -> list[File]:
    """Files created before ``now - grace`` that no message or queued input refers to."""
    files = File.objects.filter(created_at__lt=now - grace)
    if scope is not None:
        files = files.filter(scope_key=scope)
    candidates = list(files.order_by("created_at", "id"))
    if not candidates:
        return []
    scopes = {f.scope_key for f in candidates}
    referenced: set[str] = set()
    # References are the stored parts (MF-039): read only rows that mention a file part.
    for parts in Message.objects.filter(
        scope_key__in=scopes, parts__icontains=FILE_REF_PART
    ).values_list("parts", flat=True):
        referenced.update(_file_ids(parts))
    for message in QueueItem.objects.filter(
        scope_key__in=scopes, message__icontains=FILE_REF_PART
    ).values_list("message", flat=True):
        referenced.update(_file_ids(message.get("parts") if isinstance(message, dict) else None))
    return [f for f in candidates if f.id not in referenced]


def _file_ids(parts: Any) -> set[str]:
    if not isinstance(parts, list):
        return set()
    return {
        p["data"]["fileId"]
        for p in parts
        if isinstance(p, dict)
        and p.get("type") == FILE_REF_PART
        and isinstance(p.get("data"), dict)
        and isinstance(p["data"].get("fileId"), str)
    }


def _purge_files(files: list[File], report: PurgeReport) -> None:
    for row in files:
        report.files.append(PurgedFile(row.id, row.scope_key, row.byte_size, row.storage_name))
    if report.dry_run or not files:
        return
    # The rows' post_delete handler deletes their stored bytes once this commits.
    with transaction.atomic():
        File.objects.filter(id__in=[row.id for row in files]).delete()


def purge(
    *,
    older_than: timedelta | None = None,
    archived: bool = False,
    scope: str | None = None,
    orphan_files: bool = False,
    orphan_grace: timedelta = ORPHAN_GRACE,
    cancel_active: bool = False,
    dry_run: bool = False,
) -> PurgeReport:
    """Delete the threads matching every given criterion (age by last activity, archived,
    scope), then, with ``orphan_files``, files no message refers to (in ``scope`` if given).

    Thread criteria combine with AND; at least one criterion is required, so a bare call
    never empties the database. ``dry_run`` reports the same selection and changes nothing.
    """
    if older_than is None and not archived and scope is None and not orphan_files:
        raise PurgeError("give at least one of older_than, archived, scope, orphan_files")
    if (older_than is not None and older_than < timedelta(0)) or orphan_grace < timedelta(0):
        raise PurgeError("ages must not be negative")
    report = PurgeReport(dry_run=dry_run)
    now = timezone.now()
    if older_than is not None or archived or scope is not None:
        for thread in list(_selected(older_than, archived, scope, now)):
            _purge_thread(thread, report, cancel_active)
    if orphan_files:
        _purge_files(_orphans(scope, now, orphan_grace), report)
    return report
