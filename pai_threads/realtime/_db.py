"""Database access from realtime code running on executor loops (not requests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections

P = ParamSpec("P")
T = TypeVar("T")


def _close_after(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    try:
        return fn(*args, **kwargs)
    finally:
        close_old_connections()


async def run_db(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn`` in a worker thread, ending like a request (connections closed or pooled)."""
    return await sync_to_async(_close_after, thread_sensitive=False)(fn, *args, **kwargs)
