"""Threads and their reads: create, rename, archive, delete; list threads, messages, queue.

Every function takes the caller's :class:`Identity` and filters by its ``scope_key``; a
thread of another scope raises :class:`NotFound` exactly like a missing one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from pai_threads.conf import pai_settings
from pai_threads.errors import InvalidInput, NotFound
from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import thread_deleted, thread_updated
from pai_threads.execution import cancellation, registry
from pai_threads.identity import Identity
from pai_threads.models import File, Message, QueueItem, Run, Thread
from pai_threads.models.conditions import in_thread_order
from pai_threads.services.input_guard import check_text, lookup_id
from pai_threads.store.admission import lock_thread
from pai_threads.store.pagination import InvalidPageToken, decode_token, encode_token
from pai_threads.store.rewrites import thread_metadata_defaults
from pai_threads.store.rows import scoped_thread
from pai_threads.store.thread_headers import forget_thread, remember_thread

__all__ = [
    "MAX_TITLE",
    "Page",
    "create_thread",
    "delete_thread",
    "get_run",
    "get_thread",
    "list_messages",
    "list_queue",
    "list_threads",
    "lock_existing",
    "page_size",
    "rename_thread",
    "set_archived",
]


@dataclass(frozen=True, kw_only=True)
class Page:
    items: list[Any]
    next_page_token: str | None


def create_thread(identity: Identity, *, agent: str | None = None, title: str = "") -> Thread:
    agent_name = agent or registry.default_agent_name()
    try:
        registry.get_agent(agent_name)
    except registry.AgentNotFound:
        raise InvalidInput(f"unknown agent {agent_name!r}") from None
    thread = Thread.objects.create(
        scope_key=identity.scope_key,
        agent_name=agent_name,
        title=check_text(title, "the title")[:200],
        title_source="manual" if title else "",  # set by the application (AD-045)
        **thread_metadata_defaults(agent_name),
    )
    remember_thread(thread)  # its first send skips the read (store.thread_headers)
    return thread


MAX_TITLE = 200


def rename_thread(identity: Identity, thread_id: str, title: object) -> Thread:
    """Set the title (whitespace folded, at most 200 characters).

    Subscribers get ``thread.updated``. The title record becomes ``manual``: automatic
    generation never replaces it unless the agent's ``thread_titles`` says
    ``overwrite="always"`` (AD-045).
    """
    if not isinstance(title, str):
        raise InvalidInput("title must be a string")
    title = " ".join(check_text(title, "the title").split())
    if len(title) > MAX_TITLE:
        raise InvalidInput(f"title must be at most {MAX_TITLE} characters")
    thread = get_thread(identity, thread_id)
    thread.title = title
    thread.title_source = "manual"
    thread.updated_at = timezone.now()
    thread.save(update_fields=["title", "title_source", "updated_at"])
    publish_after_commit(thread.id, [thread_updated(thread)])
    return thread


def get_thread(identity: Identity, thread_id: str) -> Thread:
    thread = scoped_thread(lookup_id(thread_id, "thread"), identity.scope_key)
    if thread is None:
        raise NotFound("thread not found")
    remember_thread(thread)
    return thread


def set_archived(identity: Identity, thread_id: str, archived: bool) -> Thread:
    """Archive (or restore) a thread: it stays whole and usable; lists can filter on it.
    A change publishes ``thread.updated``."""
    thread = get_thread(identity, thread_id)
    if thread.archived != archived:
        thread.archived = archived
        thread.updated_at = timezone.now()
        thread.save(update_fields=["archived", "updated_at"])
        publish_after_commit(thread.id, [thread_updated(thread)])
    return thread


def delete_thread(identity: Identity, thread_id: str) -> list[str]:
    """Delete a thread with everything in it: messages, runs and their steps, queued
    input, pending actions and the files bound to it (their stored bytes after commit).

    An active run is stopped first: a local execution is aborted at once, one elsewhere
    loses its lease at its next write and abandons the run. Returns the ids of the runs
    that were active. Subscribers get ``thread.deleted``."""
    thread = get_thread(identity, thread_id)
    with transaction.atomic():
        # The thread lock: a concurrent send or run end either finishes before the delete
        # or finds the thread gone (NotFound), never half of it.
        lock_thread(thread.id)
        # Then its runs: a claim (which inserts the run's attempt row) or a fenced write of
        # a worker either committed before the rows to delete are read, or waits for this
        # commit and finds no run (RunNotFound, LeaseLost). Unlocked, a claim between the
        # cascade's DELETE of the attempts and of the runs failed this commit.
        runs = Run.objects.select_for_update().filter(thread=thread).order_by("pk")
        active = [pk for pk, status in runs.values_list("id", "status") if status in Run.ACTIVE]
        stored = list(File.objects.filter(thread=thread).values_list("storage_name", flat=True))
        Thread.objects.filter(pk=thread.pk).delete()
        forget_thread(thread.id)  # (a process that still remembers it finds no row)
        for run_id in active:
            transaction.on_commit(partial(cancellation.abort_local, run_id, "thread deleted"))
        transaction.on_commit(partial(_delete_stored, stored))
        # Its subscribers drop it (no snapshot can follow).
        publish_after_commit(thread.id, [thread_deleted(thread.id)])
    return active


def _delete_stored(names: list[str]) -> None:
    for name in names:
        default_storage.delete(name)


def lock_existing(thread: Thread) -> None:
    """Lock the thread's row; NotFound when it was deleted since it was read."""
    if Thread.objects.select_for_update().filter(pk=thread.pk).values_list("pk").first() is None:
        raise NotFound("thread not found")


def page_size(limit: int | None) -> int:
    size = limit or pai_settings.PAGE_SIZE
    return max(1, min(size, pai_settings.MAX_PAGE_SIZE))


def list_threads(
    identity: Identity,
    *,
    limit: int | None = None,
    page_token: str | None = None,
    archived: bool | None = None,
) -> Page:
    """Most recently updated first; the token resumes after the last thread seen.
    ``archived``: only archived (True) or only active (False) threads; None lists both.
    Hidden sub-agent threads are never listed (docs/subagents.md)."""
    size = page_size(limit)
    threads = Thread.objects.filter(scope_key=identity.scope_key, parent_run__isnull=True)
    # pai_thread_scope_archived's order (newest first, ties by id), the one recency index a
    # send updates; ``archived__in`` because SQLite uses no index column for ``NOT archived``.
    threads = threads.order_by("-updated_at", "id")
    if page_token:
        try:
            updated_at, last_id = str(decode_token("threads", page_token)).split("|", 1)
        except (InvalidPageToken, ValueError) as exc:
            raise InvalidInput("invalid page token") from exc
        moment = parse_datetime(updated_at)
        threads = threads.filter(Q(updated_at__lt=moment) | Q(updated_at=moment, id__gt=last_id))
    # Active and archived apart, each read in the index's order (bounded), then merged.
    flags = (False, True) if archived is None else (archived,)
    rows = [t for flag in flags for t in threads.filter(archived__in=[flag])[: size + 1]]
    if archived is None:
        rows.sort(key=lambda t: t.id)
        rows.sort(key=lambda t: t.updated_at, reverse=True)  # stable: ties keep id order
        rows = rows[: size + 1]
    token = None
    if len(rows) > size:
        rows = rows[:size]
        token = encode_token("threads", f"{rows[-1].updated_at.isoformat()}|{rows[-1].id}")
    return Page(items=rows, next_page_token=token)


def list_messages(
    identity: Identity, thread_id: str, *, limit: int | None = None, page_token: str | None = None
) -> Page:
    """The transcript's latest page, oldest first; the token fetches the page before it."""
    thread = get_thread(identity, thread_id)
    size = page_size(limit)
    transcript = Message.objects.filter(in_transcript=True)
    messages = in_thread_order(transcript, thread.id, descending=True)
    if page_token:
        try:
            before = decode_token(f"messages:{thread.id}", page_token)
        except InvalidPageToken as exc:
            raise InvalidInput(str(exc)) from exc
        messages = messages.filter(id__lt=before)
    rows = list(messages[: size + 1])
    token = None
    if len(rows) > size:
        rows = rows[:size]
        token = encode_token(f"messages:{thread.id}", rows[-1].id)
    rows.reverse()
    return Page(items=rows, next_page_token=token)


def get_run(identity: Identity, run_id: str) -> Run:
    try:
        return Run.objects.get(id=lookup_id(run_id, "run"), scope_key=identity.scope_key)
    except Run.DoesNotExist:
        raise NotFound("run not found") from None


def list_queue(identity: Identity, thread_id: str) -> list[QueueItem]:
    thread = get_thread(identity, thread_id)
    return list(
        QueueItem.objects.filter(thread=thread, status=QueueItem.Status.QUEUED).order_by(
            "created_at", "id"
        )
    )
