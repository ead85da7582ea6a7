"""The run loop's own PostgreSQL connections, for the hot path's one-statement writes.

Most of a run's store calls are transactions and run on the store threads
(:mod:`pai_threads.store.db`): one thread hop there and back per call. The writes that are
single autocommit statements on PostgreSQL (a step's fencing CTE, the end-gated CTE of the
run's last step, a checkpoint, a tool result's self-fencing UPDATE) the run's event loop
sends itself, on an async psycopg connection of its own, with no hop. W1 measured the hops
at ~0.2 ms of a run each, and they are what a busy machine slows most (a woken thread waits
for a CPU).

Each event loop keeps up to :func:`loop_connection_count` connections (one statement at a
time each; a statement that waits for a lock holds one, not the loop), opened on first use
with the parameters, adapters and time zone of Django's connection, so values load as the
ORM loads them, and prepared as :mod:`pai_threads.store.prepared` prepares the store
threads' statements. A kept connection that the server ended while it was idle (a database
restart) is noticed before use, as the store threads notice theirs, and replaced, waiting
for the server as long as the ORM's pool would wait; one that a statement left broken, or
that a cancelled statement left busy, is closed. Errors come out as Django's
(``django.db.IntegrityError``...), as from the ORM.

Statement counters (the benchmarks, the query-budget tests) see these statements through
:func:`observe_statements`; Django's ``connection.queries`` does not list them.
"""

from __future__ import annotations

import asyncio
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.utils import DatabaseErrorWrapper

from pai_threads.conf import pai_settings
from pai_threads.store.prepared import PREPARE_ONLY_WHEN_ASKED
from pai_threads.store.thread_counts import store_thread_count

__all__ = [
    "APPLICATION_NAME",
    "LoopConnections",
    "close_loop_connections",
    "loop_connection_count",
    "loop_connections",
    "observe_statements",
    "server_hung_up",
]

#: ``application_name`` of the loops' sessions (pg_stat_activity), unless OPTIONS sets one.
APPLICATION_NAME = "pai-run-loop"

#: Called with each statement's SQL before it is sent (statement counters).
_observers: list[Callable[[str], None]] = []


def observe_statements(observer: Callable[[str], None]) -> Callable[[], None]:
    """Call ``observer(sql)`` before each statement a loop connection sends; returns the
    function that stops it."""
    _observers.append(observer)
    return lambda: _observers.remove(observer)


def loop_connection_count() -> int:
    """``PAI["LOOP_CONNECTIONS"]``, or its default: on PostgreSQL as many as the store
    threads (:func:`~pai_threads.store.thread_counts.store_thread_count`); 0 (off)
    elsewhere."""
    configured = pai_settings.LOOP_CONNECTIONS
    if connections[DEFAULT_DB_ALIAS].vendor != "postgresql":
        return 0
    if configured is not None:
        return max(0, int(configured))
    return store_thread_count()


def _connection_params() -> dict[str, Any]:
    """Django's parameters for a new connection of the default database, for psycopg's
    async connection: its adapters (jsonb loaded as text, timestamps in Django's zone)."""
    wrapper = connections[DEFAULT_DB_ALIAS]
    params = wrapper.get_connection_params()
    params.pop("cursor_factory", None)  # a sync class; the async default is wanted
    params["autocommit"] = True
    # Told apart from the ORM's sessions in pg_stat_activity (unless OPTIONS names them all).
    params.setdefault("application_name", APPLICATION_NAME)
    params["prepare_threshold"] = (
        PREPARE_ONLY_WHEN_ASKED if pai_settings.PREPARED_STATEMENTS else None
    )
    return params


def _connect_wait(settings_dict: dict[str, Any]) -> float:
    """Seconds a new connection may wait for the server: the pool's ``timeout`` (psycopg's
    default 30 s) when ``OPTIONS["pool"]`` is set, as the store threads' calls wait for a
    pooled connection; else none, as Django's own connect does not wait."""
    pool = settings_dict.get("OPTIONS", {}).get("pool")
    if not pool:
        return 0.0
    return float(pool.get("timeout", 30.0)) if isinstance(pool, dict) else 30.0


def server_hung_up(pgconn: Any) -> bool:
    """Whether the server ended this idle psycopg connection (``pgconn``: its libpq
    connection). A server that shuts down or terminates a session first sends it an error
    and closes the socket, so an idle connection with something to read is dead: one
    ``select`` with no wait finds that out, without a health check's round trip. The store
    threads' connections (store/db.py) and the loops' are checked this way before use."""
    try:
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
    except Exception:
        return True  # no socket any more
    return bool(readable)


def _cut(conn: Any) -> bool:
    """Whether an idle loop connection is closed or was ended by its server."""
    return bool(conn.closed) or server_hung_up(conn.pgconn)


class LoopConnections:
    """The connections of one event loop: at most ``size``, each running one statement at
    a time; a statement waits for a free one."""

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int) -> None:
        self.loop = loop
        self.size = size
        self.pid = os.getpid()
        self._idle: list[Any] = []
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    @property
    def open_connections(self) -> int:
        """Connections open now, idle or running a statement."""
        return self._open

    @property
    def idle_connections(self) -> int:
        return len(self._idle)

    async def _connect(self) -> Any:
        """A new connection; while the server refuses them (a restart), tried again for as
        long as the ORM's pool would wait for one (its ``timeout``; no pool: not at all)."""
        import psycopg
        import psycopg.sql

        wrapper = connections[DEFAULT_DB_ALIAS]
        deadline = time.monotonic() + _connect_wait(wrapper.settings_dict)
        delay = 0.05
        with DatabaseErrorWrapper(wrapper):
            while True:
                try:
                    conn = await psycopg.AsyncConnection.connect(**_connection_params())
                    break
                except psycopg.OperationalError:
                    if time.monotonic() + delay > deadline:
                        raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
            zone = wrapper.timezone_name
            if zone and conn.info.parameter_status("TimeZone") != zone:
                await conn.execute(wrapper.ops.set_time_zone_sql(), [zone])
            role = wrapper.settings_dict["OPTIONS"].get("assume_role")
            if role:
                set_role = psycopg.sql.SQL("SET ROLE {}").format(psycopg.sql.Literal(role))
                await conn.execute(set_role)
        return conn

    async def _acquire(self) -> Any:
        while True:
            while self._idle:
                conn = self._idle.pop()
                if not _cut(conn):
                    return conn
                self._discard(conn)
            if self._open < self.size:
                self._open += 1
                try:
                    return await self._connect()
                except BaseException:
                    self._open -= 1
                    self._wake()
                    raise
            waiter = self.loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # pass the turn on
                raise

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _release(self, conn: Any) -> None:
        if self._closed:  # closed while the statement ran: nobody keeps it any more
            self._discard(conn)
            return
        self._idle.append(conn)
        self._wake()

    def _discard(self, conn: Any) -> None:
        self._open -= 1
        conn.pgconn.finish()  # what AsyncConnection.close() does, without awaiting
        self._wake()

    async def fetchone(self, sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        """Execute one statement in autocommit; its first row (None: no row)."""
        for observer in _observers:
            observer(sql)
        conn = await self._acquire()
        try:
            with DatabaseErrorWrapper(connections[DEFAULT_DB_ALIAS]):
                cursor = conn.cursor()
                await cursor.execute(sql, params, prepare=pai_settings.PREPARED_STATEMENTS)
                # (a statement that returns no rows, e.g. DDL, has no description)
                row: tuple[Any, ...] | None = (
                    await cursor.fetchone() if cursor.description is not None else None
                )
        except BaseException:
            # A cancelled statement may still be running; a failed one in autocommit left
            # the connection idle unless the connection itself failed.
            if conn.closed or conn.info.transaction_status != _IDLE:
                self._discard(conn)
            else:
                self._release(conn)
            raise
        self._release(conn)
        return row

    def close(self) -> None:
        """Close the idle connections (the loop is closed, or the process hands its
        database over); a statement running now keeps its own until it ends."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            self._open -= 1
            if self.pid == os.getpid():  # a forked child must not end its parent's sessions
                conn.pgconn.finish()


_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE (psycopg is imported only on PostgreSQL)
_lock = threading.Lock()
_by_loop: dict[asyncio.AbstractEventLoop, LoopConnections] = {}


def loop_connections() -> LoopConnections | None:
    """The running loop's connections; None when they are off (not PostgreSQL, or
    ``PAI["LOOP_CONNECTIONS"] = 0``)."""
    loop = asyncio.get_running_loop()
    found = _by_loop.get(loop)
    if found is not None and found.pid == os.getpid():
        return found if found.size else None
    size = loop_connection_count()
    with _lock:
        for other in [other for other in _by_loop if other.is_closed()]:
            _by_loop.pop(other).close()  # loops that ended (asyncio.run): their sessions too
        found = _by_loop[loop] = LoopConnections(loop, size)
    return found if size else None


def close_loop_connections() -> None:
    """Close every loop's idle connections and forget them (tests about to drop their
    database, :func:`~pai_threads.store.db.close_store_connections`)."""
    with _lock:
        every = list(_by_loop.values())
        _by_loop.clear()
    for conns in every:
        conns.close()
