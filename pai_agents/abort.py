"""A small abort signal shared by the engine, model providers and tools.

Cancellation must reach code running in other threads (sync tools) and in the event loop
(provider streams), so the signal is a thread-safe flag plus an awaitable.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

__all__ = ["AbortSignal", "Aborted"]


class Aborted(Exception):
    """Raised by :meth:`AbortSignal.raise_if_aborted` once the signal fired."""


class AbortSignal:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason: str | None = None
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        return self._reason

    def abort(self, reason: str = "aborted") -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_abort(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once when the signal fires (at once if it already has)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def raise_if_aborted(self) -> None:
        if self._event.is_set():
            raise Aborted(self._reason or "aborted")

    async def wait(self) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not future.done():
                future.set_result(None)

        def wake() -> None:
            loop.call_soon_threadsafe(settle)

        self.on_abort(wake)
        await future
