"""Writing threads as JSON Lines (the format is in :mod:`.records`)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.core.files.storage import default_storage
from django.db.models import Model, Q
from django.utils import timezone

from pai_agents.messages.file_refs import FILE_REF_PART
from pai_threads.models import (
    File,
    Message,
    PendingAction,
    QueueItem,
    Run,
    RunAttempt,
    Step,
    Thread,
)
from pai_threads.operations.portability.records import FORMAT, VERSION, PortabilityError, row_data

__all__ = ["ExportSummary", "Writable", "export_threads"]


class Writable(Protocol):
    """A text file, or a management command's stdout."""

    def write(self, text: str, /) -> Any: ...


@dataclass(slots=True)
class ExportSummary:
    threads: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"threads": self.threads, "counts": self.counts}


def _referenced_file_ids(thread: Thread) -> set[str]:
    """Files the thread's messages and queued input refer to (MF-039), bound or not."""
    ids: set[str] = set()
    rows = Message.objects.filter(thread=thread, parts__icontains=FILE_REF_PART)
    queued = QueueItem.objects.filter(thread=thread, message__icontains=FILE_REF_PART)
    for parts in [
        *rows.values_list("parts", flat=True),
        *(m.get("parts") for m in queued.values_list("message", flat=True)),
    ]:
        for part in parts if isinstance(parts, list) else ():
            data = part.get("data") if isinstance(part, dict) else None
            if part.get("type") == FILE_REF_PART and isinstance(data, dict):
                ids.add(str(data.get("fileId")))
    return ids


def _thread_rows(thread: Thread) -> Iterator[tuple[str, Model]]:
    runs = Run.objects.filter(thread=thread).order_by("created_at", "id")
    yield "thread", thread
    yield from (("run", row) for row in runs)
    yield from (("run_attempt", row) for row in RunAttempt.objects.filter(run__in=runs))
    yield from (("message", row) for row in Message.objects.filter(thread=thread).order_by("id"))
    yield from (("step", row) for row in Step.objects.filter(run__in=runs).order_by("id"))
    yield from (("queue_item", row) for row in QueueItem.objects.filter(thread=thread))
    yield from (("pending_action", row) for row in PendingAction.objects.filter(thread=thread))
    files = File.objects.filter(
        Q(thread=thread) | Q(id__in=_referenced_file_ids(thread), scope_key=thread.scope_key)
    )
    yield from (("file", row) for row in files.order_by("created_at", "id"))


def _record(kind: str, row: Model) -> dict[str, Any]:
    record: dict[str, Any] = {"type": kind, "data": row_data(row)}
    if isinstance(row, File):
        try:
            with default_storage.open(row.storage_name, "rb") as handle:
                record["content"] = base64.b64encode(handle.read()).decode("ascii")
        except OSError as exc:
            raise PortabilityError(f"file {row.id}: its stored bytes cannot be read") from exc
    return record


def export_threads(thread_ids: Iterable[str], out: Writable) -> ExportSummary:
    """Write the threads (each with its runs, attempts, steps, messages, queue items,
    pending actions and files, bytes included) to ``out``; PortabilityError when one does
    not exist (before anything is written)."""
    ids = list(dict.fromkeys(thread_ids))
    threads = {t.id: t for t in Thread.objects.filter(id__in=ids)}
    missing = [i for i in ids if i not in threads]
    if missing:
        raise PortabilityError(f"thread(s) not found: {', '.join(missing)}")
    summary = ExportSummary(threads=ids)
    header = {
        "type": "header",
        "format": FORMAT,
        "version": VERSION,
        "exportedAt": timezone.now().isoformat(),
        "threads": ids,
    }
    out.write(json.dumps(header) + "\n")
    written = 0
    files: set[str] = set()  # a scope's upload may be referenced by two threads
    for thread_id in ids:
        for kind, row in _thread_rows(threads[thread_id]):
            if kind == "file":
                if row.pk in files:
                    continue
                files.add(row.pk)
            out.write(json.dumps(_record(kind, row), separators=(",", ":")) + "\n")
            summary.counts[kind] = summary.counts.get(kind, 0) + 1
            written += 1
    out.write(json.dumps({"type": "end", "records": written}) + "\n")
    return summary
