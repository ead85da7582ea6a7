"""The one way thread operations publish their events: after the change committed.

Operations (:mod:`pai_threads.services` and the domain modules below it) call
:func:`publish_after_commit` inside their transaction; transports (HTTP views, websocket
commands, the AI SDK endpoint, the admin) never publish. Runs publish through their sink,
:class:`~pai_threads.realtime.publisher.RealtimePublisher`. Publishing is best effort: the
database is the authority, and a client that missed an event resynchronises from a
snapshot, so a failure here never fails the operation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from django.db import DatabaseError, transaction

from pai_agents.engine.events import RunEvent

__all__ = ["Delivery", "publish_after_commit", "publish_now", "use_delivery"]

logger = logging.getLogger("pai.events")

Events = Sequence[RunEvent] | Callable[[], Sequence[RunEvent]]


class Delivery(Protocol):
    """Where published events go: numbered, buffered and fanned out to subscribers."""

    async def publish(self, thread_id: str, events: Sequence[RunEvent]) -> Any: ...

    def publish_sync(self, thread_id: str, events: Sequence[RunEvent]) -> None: ...


_delivery: Delivery | None = None


def use_delivery(delivery: Delivery) -> None:
    """Set the delivery (``pai_threads.realtime.delivery``, when the app is ready).

    Injected rather than imported, so that operations depend on this vocabulary only and
    never on the realtime package (the transports above it stay independent of it)."""
    global _delivery
    _delivery = delivery


def _current() -> Delivery:
    if _delivery is None:
        raise RuntimeError("pai_threads is not ready: add it to INSTALLED_APPS and set up Django")
    return _delivery


def publish_after_commit(thread_id: str, events: Events) -> None:
    """Publish ``events`` to the thread's subscribers once the current transaction commits
    (at once outside a transaction; never after a rollback).

    ``events`` may be a function that builds them: it runs after the commit, so its reads
    see the committed state. A database error while building is logged, not raised: the
    change is stored, and clients resynchronise."""

    def fire() -> None:
        try:
            built = events() if callable(events) else events
        except DatabaseError:
            logger.warning("could not announce a change of thread %s", thread_id, exc_info=True)
            return
        if built:
            _current().publish_sync(thread_id, built)

    transaction.on_commit(fire)


async def publish_now(thread_id: str, events: Sequence[RunEvent]) -> None:
    """Publish ``events`` at once, from async code whose change is already committed (an
    autocommit write, e.g. a generated title)."""
    await _current().publish(thread_id, events)
