"""Thread head changes clients see live: renaming a thread publishes ``thread.updated``."""

from __future__ import annotations

from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Thread
from pai_threads.realtime.projections import thread_public
from pai_threads.realtime.publisher import publish_sync

__all__ = ["rename_thread", "thread_updated"]


def rename_thread(identity: Identity, thread_id: str, title: object) -> Thread:
    """Rename (see :func:`services.rename_thread`) and tell the thread's subscribers."""
    thread = services.rename_thread(identity, thread_id, title)
    publish_sync(thread.id, [thread_updated(thread)])
    return thread


def thread_updated(thread: Thread) -> dict[str, object]:
    return {"type": "thread.updated", "threadId": thread.id, "thread": thread_public(thread)}
