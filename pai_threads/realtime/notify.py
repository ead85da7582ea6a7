"""Fan-out of sequenced events to a thread's subscribers through the channel layer.

The group message is only a fast path: consumers number-check it against the replay buffer
and refill gaps from there (``group_send`` silently drops messages for a full channel).

``InMemoryChannelLayer`` is plain asyncio state bound to the loop its consumers run on, and
runs publish from another thread (the executor's loop). So subscribers record their loop
(:func:`register_subscriber_loop`) and in-memory fan-out is scheduled onto it; a
cross-process layer (channels-redis) is called directly from any loop.

The hand-off to that loop is fire-and-forget and coalesced: publishers append to one FIFO
and at most one drain is scheduled on the subscribers' loop, which sends everything queued
in order. A run never waits for the server's loop (one wake-up serves the flushes of every
run that published meanwhile, instead of a future, a timeout timer and a task per flush).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from pai_agents.engine.events import RunEvent
from pai_agents.sync_calls import running_loop
from pai_threads.realtime.layers import InMemoryChannelLayer as LocalChannelLayer

__all__ = ["MESSAGE_TYPE", "group_name", "notify", "notify_local", "register_subscriber_loop"]

logger = logging.getLogger("pai.realtime")

# The consumer method that receives it: ``pai_events``.
MESSAGE_TYPE = "pai.events"

_subscriber_loop: asyncio.AbstractEventLoop | None = None
# Group messages waiting for the subscribers' loop, in publish order, and whether a drain
# is scheduled there (both under the lock).
_handoff: deque[tuple[Any, str, dict[str, Any]]] = deque()
_handoff_lock = threading.Lock()
_drain_scheduled = False


def group_name(thread_id: str) -> str:
    return f"pai.thread.{thread_id}"


def register_subscriber_loop() -> None:
    """Called by each subscriber: where in-memory fan-out must run (daphne has one loop)."""
    global _subscriber_loop
    _subscriber_loop = asyncio.get_running_loop()


async def notify(thread_id: str, events: Sequence[RunEvent]) -> None:
    """Send one group message carrying ``events`` (already numbered) to the thread's group."""
    layer: Any = get_channel_layer()
    if layer is None or not events:
        return
    if isinstance(layer, LocalChannelLayer):
        notify_local(layer, thread_id, list(events))
        return
    message = {"type": MESSAGE_TYPE, "events": list(events)}
    group = group_name(thread_id)
    if not isinstance(layer, InMemoryChannelLayer):
        await layer.group_send(group, message)
        return
    if _subscriber_loop is not None and _subscriber_loop is running_loop():
        await layer.group_send(group, message)
        return
    _hand_off(layer, group, message)


def notify_local(layer: LocalChannelLayer | None, thread_id: str, events: list[RunEvent]) -> None:
    """:func:`notify` through this package's in-memory layer, without a coroutine: sent at
    once on the subscribers' loop, else handed to it (never waits). ``events`` is not
    copied: the caller hands it over."""
    if layer is None or not events:
        return
    message = {"type": MESSAGE_TYPE, "events": events}
    if _subscriber_loop is not None and _subscriber_loop is running_loop():
        layer.group_send_now(group_name(thread_id), message)
        return
    _hand_off(layer, group_name(thread_id), message)


def _hand_off(layer: Any, group: str, message: dict[str, Any]) -> None:
    """Queue a group message for the subscribers' loop (another thread's)."""
    home = _subscriber_loop
    if home is None or home.is_closed() or not home.is_running():
        return  # nobody in this process subscribes (any more)
    global _drain_scheduled
    with _handoff_lock:
        _handoff.append((layer, group, message))
        if _drain_scheduled:
            return
        _drain_scheduled = True
    try:
        home.call_soon_threadsafe(_drain)
    except RuntimeError:  # the loop closed meanwhile: nobody is left to deliver to
        with _handoff_lock:
            _handoff.clear()
            _drain_scheduled = False


def _drain() -> None:
    """On the subscribers' loop: fan out everything handed off so far, in order."""
    global _drain_scheduled
    with _handoff_lock:
        batch = list(_handoff)
        _handoff.clear()
        _drain_scheduled = False
    rest: list[tuple[Any, str, dict[str, Any]]] = []
    for layer, group, message in batch:
        if rest or not isinstance(layer, LocalChannelLayer):
            rest.append((layer, group, message))  # behind the first awaited send, in order
            continue
        try:
            layer.group_send_now(group, message)
        except Exception as exc:  # subscribers refill numbered events from the buffer
            logger.warning("realtime fan-out to %s failed: %s: %s", group, type(exc).__name__, exc)
    if rest:
        task = asyncio.get_running_loop().create_task(_fan_out(rest))
        _fan_outs.add(task)
        task.add_done_callback(_fan_outs.discard)


_fan_outs: set[asyncio.Task[None]] = set()


async def _fan_out(batch: list[tuple[Any, str, dict[str, Any]]]) -> None:
    for layer, group, message in batch:
        try:
            await layer.group_send(group, message)
        except Exception as exc:  # subscribers refill numbered events from the buffer
            logger.warning("realtime fan-out to %s failed: %s: %s", group, type(exc).__name__, exc)
