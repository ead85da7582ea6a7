"""A thread subscription outside a consumer (the SSE endpoint): a channel-layer channel in
the thread's group, read batch by batch, plus the cursor that makes delivery exact."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

from channels.layers import get_channel_layer

from pai_agents.engine.events import RunEvent
from pai_threads.realtime.buffers import LogState, get_buffer
from pai_threads.realtime.notify import group_name, register_subscriber_loop
from pai_threads.realtime.sync import Cursor

__all__ = ["ThreadSubscription"]


class ThreadSubscription:
    """``async with ThreadSubscription(thread_id) as sub``: joined before ``state`` is read,
    so every event after ``sub.state.last_seq`` is received or refilled."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.buffer = get_buffer()
        self._layer: Any = get_channel_layer()
        self._channel = ""
        self.state: LogState | None = None
        self.cursor: Cursor | None = None

    async def __aenter__(self) -> ThreadSubscription:
        if self._layer is not None:
            register_subscriber_loop()
            self._channel = await self._layer.new_channel()
            await self._layer.group_add(group_name(self.thread_id), self._channel)
        self.state = await self.buffer.state(self.thread_id)
        self.cursor = Cursor(buffer=self.buffer, thread_id=self.thread_id, last=self.state.last_seq)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._channel:
            channel, self._channel = self._channel, ""
            await self._layer.group_discard(group_name(self.thread_id), channel)

    async def next_events(self, wait: float) -> list[RunEvent]:
        """The next events in order (none after ``wait`` seconds); raises ``Resync``."""
        assert self.cursor is not None
        if not self._channel:
            await asyncio.sleep(wait)
            return await self.cursor.catch_up()
        try:
            message = await asyncio.wait_for(self._layer.receive(self._channel), wait)
        except TimeoutError:
            return await self.cursor.catch_up()
        return await self.cursor.admit(message["events"])
