"""The store threads keep their database connection between calls, and drop it only when a
call left it unusable (pai_threads.store.db, issue 16)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import OperationalError, connection, transaction

from pai_threads.store.db import StoreThreads

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def threads() -> Iterator[StoreThreads]:
    pool = StoreThreads(1, name="pai-store-test")
    yield pool
    pool.stop()


def call(pool: StoreThreads, fn: Any) -> Any:
    async def run() -> Any:
        return await pool.run(fn)

    return asyncio.run(run())


def connection_id() -> int:
    connection.ensure_connection()
    return id(connection.connection)


def test_a_store_thread_reuses_its_connection_across_calls_and_loops(
    threads: StoreThreads,
) -> None:
    first = call(threads, connection_id)
    second = call(threads, connection_id)  # another event loop, the same thread
    assert first == second


def test_stopping_the_threads_closes_their_connections(threads: StoreThreads) -> None:
    def opened() -> Any:
        connection.ensure_connection()
        return connection

    wrapper = call(threads, opened)
    threads.stop()
    assert wrapper.connection is None


def test_a_call_that_leaves_a_transaction_open_never_hands_it_to_the_next_call(
    threads: StoreThreads,
) -> None:
    def leak() -> int:
        transaction.atomic().__enter__()  # never exited: a bug in a store call
        return connection_id()

    def state() -> tuple[int, bool]:
        return connection_id(), connection.in_atomic_block

    leaked = call(threads, leak)
    now, in_atomic = call(threads, state)
    assert not in_atomic
    assert now != leaked


def test_errors_and_results_reach_the_awaiting_coroutine(threads: StoreThreads) -> None:
    def broken_sql() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM pai_no_such_table")

    with pytest.raises(Exception, match="pai_no_such_table"):
        call(threads, broken_sql)
    # The failed statement did not spoil the connection: the next call uses it again.
    assert call(threads, lambda: 41 + 1) == 42


@pytest.mark.postgres
def test_a_connection_the_server_ended_while_idle_is_replaced_before_the_next_call(
    threads: StoreThreads,
) -> None:
    """A database restart ends every session; the next store call must not fail on it."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: a server-side session to terminate")

    def backend_pid() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return int(cursor.fetchone()[0])

    pid = call(threads, backend_pid)
    with connection.cursor() as cursor:  # the test's own connection ends the thread's
        cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
        assert cursor.fetchone()[0] is True
    assert call(threads, backend_pid) != pid


@pytest.mark.postgres
def test_a_connection_cut_during_a_call_fails_that_call_only(threads: StoreThreads) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: a server-side session to terminate")

    def terminate_self() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    with pytest.raises(OperationalError):
        call(threads, terminate_self)
    assert call(threads, lambda: connection.cursor().execute("SELECT 1") is not None)
