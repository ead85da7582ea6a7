"""A leaner in-memory channel layer for the embedded default.

Channels' ``InMemoryChannelLayer`` scans every channel and group membership for expired
entries on each send, receive and group send, so fanning out one token delta costs more
the more browsers are connected (benchmark W4 profiles it at a fifth of the server's CPU
with 100 streams). Here the scan runs at most once a second; expired messages may linger
that much longer, which nothing relies on.

It also deep-copies every message for every receiving channel (standing in for the
serialization a cross-process layer does). The realtime fan-out's ``pai.events`` batches
are read-only to their receivers (events are numbered copies the replay buffer owns; a
consumer only serializes them), so those get a shallow copy of the envelope instead: the
deep copy was a tenth of the server's CPU per delta. Every other message is copied as before.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer

__all__ = ["InMemoryChannelLayer"]

# The message type of realtime fan-out (``pai_threads.realtime.notify.MESSAGE_TYPE``).
_SHARED_TYPE = "pai.events"


class InMemoryChannelLayer(ChannelsInMemoryChannelLayer):
    _last_clean = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._last_clean >= 1.0:
            self._last_clean = now
            super()._clean_expired()

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        if message.get("type") != _SHARED_TYPE:
            await super().send(channel, message)
            return
        assert "__asgi_channel__" not in message
        self.require_valid_channel_name(channel)
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        try:
            queue.put_nowait((time.time() + self.expiry, {**message}))
        except asyncio.QueueFull:
            raise ChannelFull(channel) from None
