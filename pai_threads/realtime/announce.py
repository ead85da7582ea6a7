"""Telling a thread's subscribers about changes made outside an execution.

Executions publish through their sink; HTTP calls, websocket commands and the admin change
state too (a send, a cancel, an answered action) and announce it here, after the change
committed, so every client sees it without waiting for the next run event.
"""

from __future__ import annotations

from typing import Any

from pai_threads.models import Message, Run
from pai_threads.realtime.projections import message_public, run_public, side_state_events
from pai_threads.realtime.publisher import publish_sync

__all__ = ["announce", "announce_deleted", "message_committed", "run_status", "thread_deleted"]


def message_committed(thread_id: str, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message.committed", "threadId": thread_id, "message": message}


def run_status(run: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "run.status",
        "threadId": run["threadId"],
        "runId": run["id"],
        "status": run["status"],
        "run": run,
    }


def announce(thread_id: str, *, message: Message | None = None, run: Run | None = None) -> None:
    """Publish the committed message and/or run status, then the queue and pending actions."""
    events: list[dict[str, Any]] = []
    if message is not None:
        events.append(message_committed(thread_id, message_public(message)))
    if run is not None:
        events.append(run_status(run_public(run)))
    publish_sync(thread_id, [*events, *side_state_events(thread_id)])


def thread_deleted(thread_id: str) -> dict[str, Any]:
    return {"type": "thread.deleted", "threadId": thread_id}


def announce_deleted(thread_id: str) -> None:
    """The thread is gone: its subscribers drop it (no snapshot can follow)."""
    publish_sync(thread_id, [thread_deleted(thread_id)])
