"""Delivery of a thread's events: number them in its replay buffer, fan them out.

The one path every event takes to subscribers, whoever built it (a run's
:class:`~pai_threads.realtime.publisher.RealtimePublisher`, an operation through
:func:`pai_threads.events.publish_after_commit`). Best effort by design: the database is
the authority, and a client that missed something resynchronises from a snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence

from asgiref.sync import async_to_sync

from pai_agents.engine.events import RunEvent
from pai_threads.realtime.buffers import get_buffer
from pai_threads.realtime.link import Outage
from pai_threads.realtime.notify import notify

__all__ = ["publish", "publish_sync"]

# Redis down: one warning when publishing starts failing, one when it works again.
_outage = Outage("realtime publishing")


async def publish(thread_id: str, events: Sequence[RunEvent]) -> list[RunEvent]:
    """Number, buffer and fan out ``events`` now; returns them with their ``seq``.

    A buffer that cannot be reached drops the events (the database has what matters, and
    subscribers resynchronise after the outage); a failed fan-out loses nothing, since
    subscribers refill numbered events from the buffer."""
    try:
        numbered = await get_buffer().append(thread_id, events)
    except Exception as exc:
        _outage.failed(exc)
        return []
    try:
        await notify(thread_id, numbered)
    except Exception as exc:
        _outage.failed(exc)
        return numbered
    _outage.recovered()
    return numbered


def publish_sync(thread_id: str, events: Sequence[RunEvent]) -> None:
    """:func:`publish` for synchronous code (operations, after their commit)."""
    async_to_sync(publish)(thread_id, events)
