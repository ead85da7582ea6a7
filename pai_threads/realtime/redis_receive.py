"""One read loop per process for the Redis channel layer's process-local channels.

Every channel ``new_channel`` makes (``specific.<client prefix>!<id>``: one per websocket
consumer) lives in the *same* Redis sorted set, the process's ``specific.<prefix>!`` key;
each message names the channels it is for. channels-redis receives it per message with
four round trips (a cleanup script, ``BZPOPMIN``, a backup ``ZADD``, a cleanup
``ZPOPMIN`` in a task) and two tasks plus an ``asyncio.wait`` per ``receive`` call: about
400 us of a server's CPU per delivered delta with 25 live streams (issue 16).

:class:`ProcessReceiver` keeps one read loop (a task) per process instead, while anything
waits: one ``BZMPOP ... MIN COUNT <n>`` pops every queued message at once, oldest first
(``BZPOPMIN`` on a Redis before 7.0), and hands each to the futures of the consumers
waiting for it, or to its channel's inbox (bounded like channels-redis' receive buffer,
the oldest dropped) when its consumer is busy. A ``receive`` is then one future.

A consumer may :meth:`~ProcessReceiver.attach` a receiver to its channel (as with the
in-memory layer, :mod:`pai_threads.realtime.layers`): a ``pai.events`` batch for a channel
with nothing waiting in its inbox and no message handed over but not yet taken is offered
to it first, and it may take the batch right there (the websocket consumer writes the
frames when it has nothing else in flight) instead of a future, a task wake-up and the
consumer's dispatch. A batch it declines goes the usual way, so a channel's messages stay
in order.

Delivery guarantees are at least channels-redis': a message is lost only when the popping
read's reply is lost (the connection died, or the loop was torn down at shutdown), as in
channels-redis' own ``BZPOPMIN``; from the reply to the hand-off nothing awaits, so its
backup queue protected nothing there. Unlike there, a consumer's cancellation (a client
disconnecting) never cancels a read that pops other consumers' messages: the read runs in
the loop's own task, and a message handed to a receive cancelled meanwhile is kept at the
front of its inbox. A failing read fails every waiting ``receive`` with its error (as
channels-redis' ``receive`` raises); the next ``receive`` starts a new loop. Group
membership and expiry are untouched (sending and ``group_add`` are channels-redis').
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from redis.exceptions import ResponseError

__all__ = ["RECEIVE_BATCH", "ProcessReceiver", "Receiver"]

# A channel's receiver of shared batches: True when it took the message.
Receiver = Callable[[dict[str, Any]], bool]

# The message type of realtime fan-out (``pai_threads.realtime.notify.MESSAGE_TYPE``).
_SHARED_TYPE = "pai.events"

# The most messages one pop takes (a process's consumers share the key's capacity).
RECEIVE_BATCH = 500


class ProcessReceiver:
    """Receives for the process-local channels of one non-local name (``<prefix>.<client
    prefix>!``) of a channel layer, on one event loop at a time."""

    def __init__(self, layer: Any, real_channel: str) -> None:
        self.layer = layer
        self.key = layer.prefix + real_channel
        self.index = layer.consistent_hash(real_channel)
        self.waiters: dict[str, deque[asyncio.Future[dict[str, Any]]]] = {}
        self.inboxes: dict[str, deque[dict[str, Any]]] = {}
        self.receivers: dict[str, Receiver] = {}
        # Channels whose waiter got a message its receive has not returned yet: nothing
        # may overtake it.
        self.handed: set[str] = set()
        self.task: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.bzmpop = True  # Redis >= 7.0; False after "unknown command"

    def attach(self, channel: str, receiver: Receiver) -> None:
        """Offer ``pai.events`` batches for ``channel`` to ``receiver`` before its waiters
        and inbox (it runs in the read loop, on the consumers' loop)."""
        self.receivers[channel] = receiver

    def detach(self, channel: str) -> None:
        self.receivers.pop(channel, None)

    async def receive(self, channel: str) -> dict[str, Any]:
        inbox = self.inboxes.get(channel)
        if inbox:
            message = inbox.popleft()
            if not inbox:
                del self.inboxes[channel]
            return message
        loop = asyncio.get_running_loop()
        running = self.task is not None and not self.task.done()
        if running and self.loop is not loop:
            raise RuntimeError(
                "Two event loops are trying to receive() on one channel layer at once!"
            )
        waiter: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.waiters.setdefault(channel, deque()).append(waiter)
        if not running:
            self.loop = loop
            self.task = loop.create_task(self._read(), name="pai-redis-receive")
        try:
            return await waiter
        except asyncio.CancelledError:
            self._forget(channel, waiter)
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                # Handed over as the receive was cancelled: the channel's next receive gets it.
                self._inbox(channel).appendleft(waiter.result())
            raise
        finally:
            self.handed.discard(channel)

    def _forget(self, channel: str, waiter: asyncio.Future[dict[str, Any]]) -> None:
        waiters = self.waiters.get(channel)
        if waiters is not None and waiter in waiters:
            waiters.remove(waiter)
            if not waiters:
                del self.waiters[channel]

    def _inbox(self, channel: str) -> deque[dict[str, Any]]:
        inbox = self.inboxes.get(channel)
        if inbox is None:
            inbox = self.inboxes[channel] = deque(maxlen=self.layer.capacity)
        return inbox

    async def _read(self) -> None:
        """Pop and hand out until a pop times out with nobody waiting."""
        try:
            while True:
                members = await self._pop(self.layer.connection(self.index), self.key)
                if members:
                    self.hand_out(members)
                elif not self.waiters:
                    return
        except BaseException as exc:
            self._fail(exc)
            if not isinstance(exc, Exception):
                raise

    async def _pop(self, connection: Any, key: str) -> list[bytes]:
        timeout = self.layer.brpop_timeout
        if self.bzmpop:
            try:
                reply = await connection.execute_command(
                    "BZMPOP", timeout, 1, key, "MIN", "COUNT", RECEIVE_BATCH
                )
            except ResponseError as exc:
                if "unknown command" not in str(exc).lower():
                    raise
                self.bzmpop = False
            else:
                return [] if reply is None else [member for member, _score in reply[1]]
        popped = await connection.bzpopmin(key, timeout=timeout)
        return [] if popped is None else [popped[1]]

    def hand_out(self, members: list[bytes]) -> None:
        """Deliver popped messages, in order, to their channels' waiters or inboxes."""
        for member in members:
            message = self.layer.deserialize(member)
            channels = message.pop("__asgi_channel__", None)
            for channel in [channels] if isinstance(channels, str) else channels or ():
                self._deliver(channel, message)

    def _deliver(self, channel: str, message: dict[str, Any]) -> None:
        receiver = self.receivers.get(channel)
        if (
            receiver is not None
            and message.get("type") == _SHARED_TYPE
            and channel not in self.handed
            and not self.inboxes.get(channel)
            and receiver(message)
        ):
            return
        waiters = self.waiters.get(channel)
        while waiters:
            waiter = waiters.popleft()
            if not waiters:
                del self.waiters[channel]
            if waiter.done():  # cancelled meanwhile
                continue
            inbox = self.inboxes.get(channel)
            if inbox:  # an earlier message went back to the inbox: it goes first
                inbox.append(message)
                message = inbox.popleft()
            waiter.set_result(message)
            self.handed.add(channel)
            return
        self._inbox(channel).append(message)

    def _fail(self, exc: BaseException) -> None:
        """The read loop ended with ``exc``: every waiting receive raises it."""
        waiters, self.waiters = self.waiters, {}
        for queue in waiters.values():
            for waiter in queue:
                if waiter.done():
                    continue
                if isinstance(exc, Exception):
                    waiter.set_exception(exc)
                else:
                    waiter.cancel()
