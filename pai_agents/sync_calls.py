"""Where sync user code (tools, hooks, builders written as plain ``def``) runs.

The runtime never blocks its event loop: a sync callable goes to a worker thread. The host
framework may wrap that call: ``pai_threads`` installs a runner that ends each call like a
Django request (``close_old_connections`` before and after), so a sync tool that uses the
ORM never keeps a broken or stale connection in a long-lived worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

__all__ = ["SyncRunner", "run_sync", "running_loop", "use_sync_runner"]


class SyncRunner(Protocol):
    """Runs ``fn(*args, **kwargs)`` off the event loop and returns its result."""

    def __call__(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Awaitable[Any]: ...


_runner: SyncRunner = asyncio.to_thread


def use_sync_runner(runner: SyncRunner | None) -> None:
    """Install ``runner`` for every sync user callable (``None``: back to ``asyncio.to_thread``)."""
    global _runner
    _runner = runner if runner is not None else asyncio.to_thread


async def run_sync(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Run a sync user callable through the installed runner."""
    return await _runner(fn, *args, **kwargs)


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running on this thread, or None (plain synchronous code: a request's
    thread, a store thread, a Celery task), where ``asyncio.get_running_loop`` raises."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
