"""Telling a thread's subscribers about changes made outside an execution.

Kept for existing imports: the events are built by :mod:`pai_threads.events` and the
thread's operations publish them after commit (:func:`pai_threads.events.publish_after_commit`).
"""

from __future__ import annotations

from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import (
    message_committed,
    run_status_of,
    side_state,
    stored_message_committed,
    thread_deleted,
)
from pai_threads.models import Message, Run

__all__ = ["announce", "announce_deleted", "message_committed", "run_status", "thread_deleted"]

run_status = run_status_of


def announce(thread_id: str, *, message: Message | None = None, run: Run | None = None) -> None:
    """Publish the committed message and/or run status, then the queue and pending actions."""
    publish_after_commit(
        thread_id,
        lambda: [
            *([stored_message_committed(message)] if message is not None else []),
            *([run_status_of(run)] if run is not None else []),
            *side_state(thread_id),
        ],
    )


def announce_deleted(thread_id: str) -> None:
    """The thread is gone: its subscribers drop it (no snapshot can follow)."""
    publish_after_commit(thread_id, [thread_deleted(thread_id)])
