"""Running sync ORM code from async runtime code (executor loops, not requests).

The store's calls run on :class:`StoreThreads`: a few process-wide threads that keep their
database connection from one call to the next, like a worker process does. Reconnecting per
call (what ``close_old_connections`` does with the default ``CONN_MAX_AGE = 0``) cost a run
more than its SQL did (docs/benchmarks.md, W1). A connection the server ended while it was
idle (a database restart) is replaced before the next call uses it; one that a call left
unusable is closed after that call.

:func:`run_db_closing` closes the thread's connection outright, for short-lived loops (one
per dispatched job) whose kept connection would outlive its thread; :func:`run_user_sync`
runs user code like a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection, connections

from pai_threads.store.loop_connections import close_loop_connections, server_hung_up
from pai_threads.store.thread_counts import store_thread_count, usable_cpu_count

__all__ = [
    "StoreThreads",
    "close_store_connections",
    "run_db",
    "run_db_closing",
    "run_user_sync",
    "store_thread_count",
    "store_threads",
    "swap_store_threads",
    "usable_cpu_count",
]

P = ParamSpec("P")
T = TypeVar("T")

_Job = tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[[], Any]] | None


def _drop_cut_connections() -> None:
    """Before a call: close a kept connection whose server ended it meanwhile
    (:func:`~pai_threads.store.loop_connections.server_hung_up`), so the call runs on a new
    connection instead of failing on the old one (a database restart then costs no failed
    call, as with a pool that checks connections)."""
    for conn in connections.all(initialized_only=True):
        raw = conn.connection
        pgconn = getattr(raw, "pgconn", None)  # psycopg 3; SQLite has no server to lose
        if pgconn is not None and server_hung_up(pgconn):
            conn.close()


def _settle_connections() -> None:
    """After a call: keep each open connection unless the call left it unusable."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if conn.in_atomic_block:
            # A call must never leave a transaction open (a bug); never reuse one that did:
            # close it (the server rolls back) and let the next call start a new wrapper.
            conn.close()
            del connections[conn.alias]
        elif conn.errors_occurred:  # set by any database error but data/integrity ones
            if conn.is_usable():
                conn.errors_occurred = False
            else:
                conn.close()
        elif conn.get_autocommit() != conn.settings_dict["AUTOCOMMIT"]:
            conn.close()


def _resolve(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class StoreThreads:
    """A fixed set of threads that run store calls and keep their connections.

    One shared queue, so an idle thread takes the next call; ``size`` bounds how many store
    calls of this process run at once (and how many connections it holds)."""

    def __init__(self, size: int, *, name: str = "pai-store") -> None:
        if size < 1:
            raise ValueError("StoreThreads needs at least one thread")
        self.size = size
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                connections.close_all()
                return
            loop, future, call = job
            result: Any = None
            error: BaseException | None = None
            try:
                _drop_cut_connections()
                result = call()
            except BaseException as exc:  # handed to the awaiting coroutine
                error = exc
            try:
                _settle_connections()
            except Exception:  # never lose the call's own outcome to the cleanup
                connection.close()
            # A loop that closed while the call ran has nobody awaiting it any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, future, result, error)

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()
        self._jobs.put((loop, future, lambda: context.run(fn, *args, **kwargs)))
        return await future

    def stop(self) -> None:
        """Close every thread's connections and end the threads (waits for running calls)."""
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()


_lock = threading.Lock()
_threads: StoreThreads | None = None


def store_threads() -> StoreThreads:
    """The process's store threads, started on first use (:func:`store_thread_count`)."""
    global _threads
    threads = _threads  # started: no lock on the hot path
    if threads is not None:
        return threads
    with _lock:
        if _threads is None:
            _threads = StoreThreads(store_thread_count())
        return _threads


def swap_store_threads(threads: StoreThreads | None) -> StoreThreads | None:
    """Make ``threads`` the process's store threads (None: start anew on the next call);
    returns the previous ones, still running. For measurements that count a run's SQL on
    threads of their own (tests/support/query_budget.py)."""
    global _threads
    with _lock:
        previous, _threads = _threads, threads
    return previous


def close_store_connections() -> None:
    """Close the store threads' connections and the run loops' idle ones
    (:mod:`~pai_threads.store.loop_connections`); they open again on the next store call.

    For whoever must see no connection left open: a test database about to be dropped, a
    process handing its database over. Nothing needs it at exit (the threads are daemons)."""
    global _threads
    with _lock:
        threads, _threads = _threads, None
    if threads is not None:
        threads.stop()
    close_loop_connections()


async def run_db(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn`` on a store thread, whose connection stays open for the next call."""
    return await store_threads().run(fn, *args, **kwargs)


def _close_after(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    try:
        return fn(*args, **kwargs)
    finally:
        connection.close()


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
