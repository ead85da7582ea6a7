"""A process-wide event loop on a daemon thread, where runs execute.

Runs spend nearly all their time awaiting the model, so one loop holds hundreds of them;
both executors submit here (the Celery task blocks its pool slot until its run ends).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["BackgroundLoop", "background_loop"]

T = TypeVar("T")


class BackgroundLoop:
    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pai-runs", daemon=True)
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    @property
    def native_id(self) -> int | None:
        """The operating system's id of the loop's thread (lease owners name it)."""
        return self._thread.native_id


_lock = threading.Lock()
_instance: BackgroundLoop | None = None


def background_loop() -> BackgroundLoop:
    global _instance
    with _lock:
        if _instance is None:
            _instance = BackgroundLoop()
        return _instance
