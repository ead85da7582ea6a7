"""Prompt abort of an in-flight provider await, whichever thread the signal fires from."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from pai_agents.abort import Aborted, AbortSignal

__all__ = ["AbortWatch"]

_T = TypeVar("_T")


class AbortWatch:
    """Interrupts an in-flight await of the stream when the signal fires.

    The signal may fire from any thread. Its callback hops onto the event loop and cancels
    the consuming task only while that task is suspended inside :meth:`wait` (waiting on the
    network), then the cancellation is turned back into :class:`Aborted` with ``uncancel``.
    This stops the HTTP read at once instead of after the next chunk, which may never come.
    """

    def __init__(self, signal: AbortSignal | None) -> None:
        self._signal = signal
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[Any] | None = None
        self._waiting = False
        self._interrupted = False
        self._closed = False
        if signal is not None:
            signal.on_abort(self._on_abort)

    def _on_abort(self) -> None:
        if self._closed:
            return
        with contextlib.suppress(RuntimeError):  # a closed loop has nothing waiting any more
            self._loop.call_soon_threadsafe(self._interrupt)

    def _interrupt(self) -> None:
        if self._closed or not self._waiting or self._interrupted or self._task is None:
            return
        self._interrupted = True
        self._task.cancel()

    def check(self) -> None:
        """Raise :class:`Aborted` if the signal has fired (between chunks, before requests)."""
        if self._signal is not None:
            self._signal.raise_if_aborted()

    async def wait(self, awaitable: Awaitable[_T]) -> _T:
        """Await ``awaitable``; an abort while waiting raises :class:`Aborted` promptly."""
        self._task = asyncio.current_task()
        self._waiting = True
        try:
            result = await awaitable
        except asyncio.CancelledError:
            if self._take_interrupt() == 0:
                raise Aborted(self._reason()) from None
            raise
        except Exception as exc:
            # The transport may turn our cancellation into its own error.
            if self._take_interrupt() is not None:
                raise Aborted(self._reason()) from exc
            raise
        finally:
            self._waiting = False
        if self._take_interrupt() is not None:
            raise Aborted(self._reason())
        return result

    def _take_interrupt(self) -> int | None:
        """Undo our own ``cancel()``; the remaining cancel count, or None if we did not cancel."""
        if not self._interrupted or self._task is None:
            return None
        self._interrupted = False
        return self._task.uncancel()

    def _reason(self) -> str:
        return (self._signal.reason if self._signal is not None else None) or "aborted"

    def close(self) -> None:
        self._closed = True
