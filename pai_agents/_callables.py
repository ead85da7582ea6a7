"""Calling user code that may be ``def`` or ``async def`` without blocking the event loop."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pai_agents.sync_calls import run_sync

__all__ = ["call_user"]


async def call_user(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Await an async callable directly; run a sync one in a worker thread (:func:`run_sync`).

    A sync callable that returns an awaitable (a lambda around a coroutine function) is
    awaited too, so builders and hooks can be written either way.
    """
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    result = await run_sync(fn, *args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result
