"""Thread head changes clients see live: renaming a thread publishes ``thread.updated``."""

from __future__ import annotations

from pai_threads import services
from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import thread_updated
from pai_threads.identity import Identity
from pai_threads.models import Thread

__all__ = ["rename_thread", "thread_updated"]


def rename_thread(identity: Identity, thread_id: str, title: object) -> Thread:
    """Rename (see :func:`services.rename_thread`) and tell the thread's subscribers."""
    thread = services.rename_thread(identity, thread_id, title)
    publish_after_commit(thread.id, [thread_updated(thread)])
    return thread
