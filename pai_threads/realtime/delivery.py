"""Delivery of a thread's events: number them in its replay buffer, fan them out.

The one path every event takes to subscribers, whoever built it (a run's
:class:`~pai_threads.realtime.publisher.RealtimePublisher`, an operation through
:func:`pai_threads.events.publish_after_commit`). Best effort by design: the database is
the authority, and a client that missed something resynchronises from a snapshot.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from pai_agents.engine.events import RunEvent
from pai_threads.realtime.buffers import ReplayBuffer, get_buffer
from pai_threads.realtime.buffers.memory import MemoryReplayBuffer
from pai_threads.realtime.layers import InMemoryChannelLayer
from pai_threads.realtime.link import Outage
from pai_threads.realtime.notify import group_name, notify, notify_local

__all__ = ["in_process", "publish", "publish_inline", "publish_nowait", "publish_sync"]

logger = logging.getLogger("pai.realtime")

# Redis down: one warning when publishing starts failing, one when it works again.
_outage = Outage("realtime publishing")


async def publish(thread_id: str, events: Sequence[RunEvent]) -> list[RunEvent]:
    """Number, buffer and fan out ``events`` now; returns them with their ``seq``.

    A buffer that cannot be reached drops the events (the database has what matters, and
    subscribers resynchronise after the outage); a failed fan-out loses nothing, since
    subscribers refill numbered events from the buffer. With the Redis buffer and PAI's
    Redis channel layer on one Redis database, both are one script (one round trip); in
    process, :func:`publish_inline` (the one in-process implementation)."""
    if in_process():
        return publish_inline(thread_id, events)
    handed = _hand_over(thread_id, events) if events else False
    if handed is True:
        return []
    if handed is not False:
        try:
            return list(_redis_buffers().numbered(events, await handed))
        except Exception:  # reported by _handed_over
            return []
    buffer = get_buffer()
    try:
        numbered = await buffer.append(thread_id, events)
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


def publish_nowait(thread_id: str, events: Sequence[RunEvent]) -> bool | asyncio.Future[Any]:
    """:func:`publish` without waiting for it, when nothing needs to: in process
    (:func:`publish_inline`; True), or handed to the joint Redis script's queue, which sends
    this loop's batches in order (:class:`~pai_threads.realtime.buffers.script_batch.ScriptBatch`):
    a run's token batches then cost no task and no wait each; the script's reply is returned
    (its outcome is reported as :func:`publish` reports it; await it to know the batch is
    out). False, with nothing done: the caller must ``await publish(...)`` (a layer and
    buffer that publish in two steps)."""
    if in_process():
        publish_inline(thread_id, events)
        return True
    return _hand_over(thread_id, events) if events else True


def _hand_over(thread_id: str, events: Sequence[RunEvent]) -> bool | asyncio.Future[Any]:
    """Hand ``events`` to the joint script (Redis buffer and PAI's Redis layer on one
    database): its reply, whose outcome is reported when it comes; True when they were
    dropped (Redis is away); False, with nothing done, when buffer and layer publish in two
    steps."""
    buffer = get_buffer()
    layer = _joint_layer(buffer)
    if layer is None:
        return False
    group = group_name(thread_id)
    try:
        joint: Any = buffer  # a RedisReplayBuffer (see _can_join)
        reply: asyncio.Future[Any] = joint.hand_over(
            thread_id, events, layer, group, functools.partial(_handed_over, group=group)
        )
    except ValueError:  # the layer's configuration needs its own group_send
        _no_longer_joint()
        return False
    except Exception as exc:
        _outage.failed(exc)
        return True
    return reply


def _handed_over(reply: Any, *, group: str) -> None:
    """A handed-over batch's reply (an exception: it failed): its outcome reported as every
    publication's is."""
    if not isinstance(reply, Exception):
        try:
            _redis_buffers().report_capacity(reply, group)
        except Exception as exc:  # a reply of another shape: not a publication that worked
            reply = exc
    if isinstance(reply, Exception):
        _outage.failed(reply)
    else:
        _outage.recovered()


def _redis_buffers() -> Any:
    """The Redis buffer's module (Redis support is an extra: imported only when used)."""
    from pai_threads.realtime.buffers import redis

    return redis


# The last (buffer, layer) pair asked about, and whether it publishes in one script.
_joint: tuple[ReplayBuffer, Any, bool] | None = None


def _joint_layer(buffer: ReplayBuffer) -> Any:
    """The channel layer when ``buffer`` can append and fan out in one script, else None."""
    global _joint
    layer = get_channel_layer()
    known = _joint
    if known is None or known[0] is not buffer or known[1] is not layer:
        known = _joint = (buffer, layer, _can_join(buffer, layer))
    return layer if known[2] else None


def _can_join(buffer: ReplayBuffer, layer: Any) -> bool:
    """The Redis buffer and PAI's Redis layer on one database (imported only then: Redis
    support is an extra)."""
    if layer is None or type(buffer) is MemoryReplayBuffer:
        return False
    try:
        from pai_threads.realtime.buffers.redis import RedisReplayBuffer
        from pai_threads.realtime.redis_layer import RedisChannelLayer
    except ImportError:
        return False
    return (
        isinstance(buffer, RedisReplayBuffer)
        and isinstance(layer, RedisChannelLayer)
        and buffer.shares_server(layer)
    )


def _no_longer_joint() -> None:
    global _joint
    if _joint is not None:
        _joint = (_joint[0], _joint[1], False)


def publish_sync(thread_id: str, events: Sequence[RunEvent]) -> None:
    """:func:`publish` for synchronous code (operations, after their commit).

    In process (the embedded default: the memory buffer and an in-memory layer) publishing
    never waits on anything: the events are numbered under the buffer's lock and handed to
    the subscribers' loop, so :func:`publish` runs right here, without an event loop.
    Otherwise (Redis) it runs through ``async_to_sync`` (on the server's loop when called
    from one of its worker threads, whose connections the consumers keep fresh; on a new
    loop from plain synchronous code), which costs ~2.5 ms per call."""
    if not events:
        return
    if in_process():
        publish_inline(thread_id, events)
    else:
        async_to_sync(publish)(thread_id, events)


def in_process() -> bool:
    """Whether delivery stays in this process and never waits: the memory buffer and this
    package's in-memory layer (or none). Channels' own in-memory layer awaits a task per
    subscriber in ``group_send``, so it does not count."""
    layer = get_channel_layer()
    local_layer = layer is None or isinstance(layer, InMemoryChannelLayer)
    return local_layer and isinstance(get_buffer(), MemoryReplayBuffer)


def publish_inline(thread_id: str, events: Sequence[RunEvent]) -> list[RunEvent]:
    """:func:`publish` done right here, with or without a running loop: only when
    :func:`in_process` (the memory buffer numbers the events under its lock and the
    in-memory layer hands them to the subscribers' loop; nothing waits). No coroutine: a
    run publishes each token's batch this way. Returns the events with their ``seq``."""
    buffer = get_buffer()
    if not isinstance(buffer, MemoryReplayBuffer):
        # Only a change to the in-process path can get here: report it, never fail the caller.
        logger.error("in-process publication without the memory buffer; events not delivered")
        return []
    try:
        numbered = buffer.append_now(thread_id, events)
    except Exception as exc:
        _outage.failed(exc)
        return []
    try:
        layer = get_channel_layer()
        local = layer if isinstance(layer, InMemoryChannelLayer) else None
        notify_local(local, thread_id, list(numbered))
    except Exception as exc:  # subscribers refill numbered events from the buffer
        _outage.failed(exc)
        return numbered
    _outage.recovered()
    return numbered
