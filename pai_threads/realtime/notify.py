"""Fan-out of sequenced events to a thread's subscribers through the channel layer.

The group message is only a fast path: consumers number-check it against the replay buffer
and refill gaps from there (``group_send`` silently drops messages for a full channel).

``InMemoryChannelLayer`` is plain asyncio state bound to the loop its consumers run on, and
runs publish from another thread (the executor's loop). So subscribers record their loop
(:func:`register_subscriber_loop`) and in-memory fan-out is scheduled onto it; a
cross-process layer (channels-redis) is called directly from any loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from pai_agents.engine.events import RunEvent

__all__ = ["MESSAGE_TYPE", "group_name", "notify", "register_subscriber_loop"]

logger = logging.getLogger("pai.realtime")

# The consumer method that receives it: ``pai_events``.
MESSAGE_TYPE = "pai.events"

_subscriber_loop: asyncio.AbstractEventLoop | None = None
_HANDOFF_TIMEOUT = 5.0


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
    message = {"type": MESSAGE_TYPE, "events": list(events)}
    group = group_name(thread_id)
    if not isinstance(layer, InMemoryChannelLayer):
        await layer.group_send(group, message)
        return
    home = _subscriber_loop
    if home is None or home.is_closed() or not home.is_running():
        return  # nobody in this process subscribes (any more)
    if home is asyncio.get_running_loop():
        await layer.group_send(group, message)
        return
    future = asyncio.run_coroutine_threadsafe(layer.group_send(group, message), home)
    try:
        # Bounded: a wedged server loop must not stall the run; consumers refill from the
        # buffer when their resync timer fires.
        await asyncio.wait_for(asyncio.wrap_future(future), timeout=_HANDOFF_TIMEOUT)
    except TimeoutError:
        logger.warning("realtime fan-out to %s timed out", group)
