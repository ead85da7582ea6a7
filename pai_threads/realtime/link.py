"""A subscriber's link to the channel layer, kept through a broker's faults.

A channel layer is a remote service under channels-redis: a receive can time out or lose
its connection, and a Redis restart forgets every group membership. None of that is the
client's doing, and none of it may close a healthy websocket (Channels closes with 1011 when
the layer's ``receive`` raises). :class:`LayerLink` therefore

* retries a failed receive with capped backoff instead of raising (a read timeout at once:
  channels-redis' 5 s blocking pop races redis-py 8's default 5 s socket timeout, see
  :mod:`.redis_layer`);
* refreshes the group membership on every watchdog tick (``group_add`` is idempotent), so a
  restarted Redis gets it back within ``REALTIME_RESYNC_SECONDS``;
* reports, once, that an outage ended: events published meanwhile may have been dropped
  without a number, so the subscriber resynchronises from a fresh snapshot.

Outages are logged once as a warning when they start and once when they end, never with a
traceback per retry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["LayerLink", "Outage", "is_transport_error", "retry_transport"]

logger = logging.getLogger("pai.realtime")

T = TypeVar("T")

_BACKOFF_FIRST = 0.05
_BACKOFF_CAP = 2.0
_timeout_hint_logged = False


def _read_timeout(exc: BaseException) -> None:
    """A receive that timed out client-side: the layer's socket timeout is too short."""
    global _timeout_hint_logged
    if not _timeout_hint_logged:
        _timeout_hint_logged = True
        logger.warning(
            "channel layer receive timed out (%s); retrying. With channels-redis, use "
            "pai_threads.realtime.redis_layer.RedisChannelLayer (a socket timeout above "
            "its blocking pop's) so this does not recur",
            exc,
        )


def is_transport_error(exc: BaseException) -> bool:
    """A fault of the connection to a service (Redis), not a bug: worth a warning and a
    retry, not a traceback. redis-py's ConnectionError and TimeoutError are not OSErrors."""
    if isinstance(exc, OSError | TimeoutError):
        return True
    return any(
        cls.__module__.startswith("redis") and cls.__name__ in ("ConnectionError", "TimeoutError")
        for cls in type(exc).__mro__
    )


async def retry_transport(call: Callable[[], Awaitable[T]], *, attempts: int) -> T:
    """``call()``, retried with backoff while it fails with a transport error."""
    delay = _BACKOFF_FIRST
    for _ in range(attempts - 1):
        try:
            return await call()
        except Exception as exc:
            if not is_transport_error(exc):
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, _BACKOFF_CAP)
    return await call()


class Outage:
    """Whether a dependency is failing, logging the transitions (not every failure)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.failing = False

    def failed(self, exc: BaseException) -> None:
        """A failure: a transport fault is logged once per streak, anything else (a bug)
        every time with its traceback."""
        if not is_transport_error(exc):
            logger.error("%s failed", self.what, exc_info=exc)
        elif not self.failing:
            logger.warning("%s failed, retrying: %s: %s", self.what, type(exc).__name__, exc)
        self.failing = True

    def recovered(self) -> bool:
        """True (once) when a failure streak ends."""
        if not self.failing:
            return False
        self.failing = False
        logger.info("%s recovered", self.what)
        return True


class LayerLink:
    """One channel of a consumer in one group of ``layer``."""

    def __init__(self, layer: Any, channel: str, group: str) -> None:
        self.layer = layer
        self.channel = channel
        self.group = group
        self.joined = False
        self._receive = Outage(f"channel layer receive for {group}")
        self._membership = Outage(f"channel layer membership of {group}")
        self._lost = False

    async def join(self) -> None:
        """Join the group (raises: the caller refuses the connection)."""
        await self.layer.group_add(self.group, self.channel)
        self.joined = True

    async def leave(self) -> None:
        if not self.joined:
            return
        self.joined = False
        try:
            await self.layer.group_discard(self.group, self.channel)
        except Exception as exc:  # the membership expires on its own
            logger.info("could not leave %s: %s: %s", self.group, type(exc).__name__, exc)

    async def receive(self) -> dict[str, Any]:
        """The next message for the channel; waits out layer failures instead of raising."""
        delay = _BACKOFF_FIRST
        while True:
            try:
                message: dict[str, Any] = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if type(exc).__name__ == "TimeoutError":  # builtin or redis-py's
                    _read_timeout(exc)
                    continue
                self._receive.failed(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _BACKOFF_CAP)
                continue
            self._receive.recovered()
            return message

    async def refresh(self) -> bool | None:
        """Re-assert the membership. True: an outage ended (resync the client); False: all
        well; None: the layer is still failing (try again next tick)."""
        try:
            await self.layer.group_add(self.group, self.channel)
        except Exception as exc:
            self._membership.failed(exc)
            self._lost = True
            return None
        self._membership.recovered()
        lost, self._lost = self._lost, False
        return lost

    def mark_lost(self) -> None:
        """Another read of the subscriber failed (the replay buffer): resync when the
        layer is back. A failed receive alone loses nothing: group messages are numbered
        and refilled from the buffer."""
        self._lost = True
