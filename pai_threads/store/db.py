"""Running sync ORM code from async runtime code (executor loops, not requests).

Worker threads are not requests, so nothing else would close their connections. Two
endings: :func:`run_db` ends each call like a request does (``close_old_connections``,
which honours CONN_MAX_AGE and connection pooling), for loops that live as long as the
process; :func:`run_db_closing` closes the thread's connection outright, for short-lived
loops (one per dispatched job) whose kept connection would outlive its thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection

__all__ = ["run_db", "run_db_closing", "run_user_sync"]

P = ParamSpec("P")
T = TypeVar("T")


def _close_old_after(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    try:
        return fn(*args, **kwargs)
    finally:
        close_old_connections()


def _close_after(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    try:
        return fn(*args, **kwargs)
    finally:
        connection.close()


async def run_db(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn`` in a worker thread, ending like a request (connections closed or pooled)."""
    return await sync_to_async(_close_old_after, thread_sensitive=False)(fn, *args, **kwargs)


async def run_db_closing(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn`` in a worker thread and close that thread's connection afterwards."""
    return await sync_to_async(_close_after, thread_sensitive=False)(fn, *args, **kwargs)


def _as_request(fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    close_old_connections()
    try:
        return fn(*args, **kwargs)
    finally:
        close_old_connections()


async def run_user_sync(fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    """The sync runner ``pai_threads`` installs for user code (``pai_agents.use_sync_runner``).

    A sync tool or hook may use the ORM from a worker thread that lives as long as the
    process; like a request, each call starts and ends with ``close_old_connections``, so a
    connection broken by a database restart is replaced and none is left open by a thread
    that ends."""
    return await asyncio.to_thread(_as_request, fn, *args, **kwargs)
