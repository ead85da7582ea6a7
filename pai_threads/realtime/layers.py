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

Channels' ``group_send`` starts one task per member channel and awaits them with
``as_completed``, although each send is a plain queue put: :meth:`InMemoryChannelLayer.
group_send_now` puts into every member's queue in one synchronous pass (a full channel
drops the message, as Channels' does), so the realtime fan-out of one batch to N
subscribers costs no task at all.

A subscriber in this process may also :meth:`~InMemoryChannelLayer.attach` a receiver to
its channel: a ``pai.events`` batch for a channel with nothing queued is offered to it
first, and it may take the batch right there (the websocket consumer writes the frames
when it has nothing else in flight) instead of a queue put, a task wake-up and the
consumer's dispatch. A batch it declines is queued as before; anything queued keeps a
channel's later batches behind it, so a channel's messages stay in order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from copy import deepcopy
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer

__all__ = ["InMemoryChannelLayer"]

# The message type of realtime fan-out (``pai_threads.realtime.notify.MESSAGE_TYPE``).
_SHARED_TYPE = "pai.events"


# How many checked group names are remembered before the set starts over.
_VALID_GROUPS_KEPT = 10_000

# A channel's receiver of shared batches: True when it took the message.
Receiver = Callable[[dict[str, Any]], bool]


class InMemoryChannelLayer(ChannelsInMemoryChannelLayer):
    _last_clean = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.receivers: dict[str, Receiver] = {}
        # Group names already checked (a regular expression per fan-out otherwise).
        self._valid_groups: set[str] = set()

    def attach(self, channel: str, receiver: Receiver) -> None:
        """Offer ``pai.events`` batches for ``channel`` to ``receiver`` before queueing
        them (it runs on the loop that fans out: the subscribers')."""
        self.receivers[channel] = receiver

    def detach(self, channel: str) -> None:
        self.receivers.pop(channel, None)

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
        if not self._put(channel, {**message}, time.time() + self.expiry):
            raise ChannelFull(channel)

    def _put(self, channel: str, message: dict[str, Any], expires: float) -> bool:
        """Queue ``message`` on ``channel``; False when the channel is full."""
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        if queue.full():
            return False
        queue.put_nowait((expires, message))
        return True

    async def receive(self, channel: str) -> dict[str, Any]:
        self._clean_expired()  # first: it may drop this channel's queue
        queue = self.channels.get(channel)
        if queue is None:  # a channel's name is checked when its queue is made
            self.require_valid_channel_name(channel)
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        try:
            _, message = await queue.get()
        finally:
            if queue.empty() and self.channels.get(channel) is queue:
                del self.channels[channel]  # as Channels does: no queue outlives its use
        return message

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.group_send_now(group, message)

    def group_send_now(self, group: str, message: dict[str, Any]) -> None:
        """``group_send`` without awaiting: must run on the loop the receivers use."""
        assert isinstance(message, dict), "Message is not a dict"
        if group not in self._valid_groups:
            self.require_valid_group_name(group)
            if len(self._valid_groups) >= _VALID_GROUPS_KEPT:
                self._valid_groups.clear()
            self._valid_groups.add(group)
        self._clean_expired()
        members = self.groups.get(group)
        if not members:
            return
        shared = message.get("type") == _SHARED_TYPE
        expires = time.time() + self.expiry
        for channel in list(members):
            if shared and self._taken(channel, message):
                continue
            # A full channel misses it, as with Channels' group_send (and refills by number).
            self._put(channel, {**message} if shared else deepcopy(message), expires)

    def _taken(self, channel: str, message: dict[str, Any]) -> bool:
        """Whether the channel's receiver took the batch (only with nothing queued)."""
        receiver = self.receivers.get(channel)
        if receiver is None:
            return False
        queue = self.channels.get(channel)
        return (queue is None or queue.empty()) and receiver(message)
