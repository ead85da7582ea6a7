"""The run loop's own connections (pai_threads.store.loop_connections), PostgreSQL only.

A run's one-statement writes go on its loop's async connection with no store-thread hop;
what the store threads guarantee must hold there too: a connection the server ended while
idle is replaced before use, errors come out as Django's, a cancelled statement never
leaves a busy connection behind, a loop holds at most its size, and closing leaves no
session open.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import IntegrityError, ProgrammingError, connection
from django.test import override_settings

from benchmarks.agents import w1_agent, w2_agent
from benchmarks.workloads.common import USER_MESSAGE
from pai_threads import services
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Message, Run
from pai_threads.store.loop_connections import (
    APPLICATION_NAME,
    close_loop_connections,
    loop_connections,
    observe_statements,
)

pytestmark = [pytest.mark.django_db(transaction=True)]

IDENTITY = Identity(scope_key="test:loop-connections", data={})


@pytest.fixture(autouse=True)
def _postgres_with_agents() -> Iterator[None]:
    if connection.vendor != "postgresql":
        pytest.skip("loop connections are PostgreSQL's (off on SQLite)")
    agents = [*settings.PAI["AGENTS"], w1_agent, w2_agent]
    with override_settings(PAI={**settings.PAI, "AGENTS": agents}):
        yield
    close_loop_connections()


def _loop_sessions(settled: int | None = None) -> list[int]:
    """The loop connections' sessions; ``settled``: wait (5 s at most) until there are that
    many (a session whose client closed lingers in pg_stat_activity for a moment)."""
    deadline = time.monotonic() + 5
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                "AND datname = current_database()",
                [APPLICATION_NAME],
            )
            pids = [row[0] for row in cursor.fetchall()]
        if settled is None or len(pids) == settled or time.monotonic() > deadline:
            return pids
        time.sleep(0.02)


def _terminate(pids: list[int]) -> None:
    with connection.cursor() as cursor:
        for pid in pids:
            cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])


def _queued(agent: str) -> str:
    thread = services.create_thread(IDENTITY, agent=agent)
    run = services.send(IDENTITY, thread.id, USER_MESSAGE, dispatch=False).run
    assert run is not None
    return run.id


async def _execute(run_id: str) -> str:
    outcome = await aexecute_run(run_id)
    assert outcome is not None
    return outcome.status


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        # step 1 with the call (fencing CTE), the tool result (self-fencing UPDATE), the
        # answer that ends the run (the gated CTE)
        (w1_agent, ["WITH pai_fence", "UPDATE", "WITH pai_fence"]),
        (w2_agent, ["WITH pai_fence"]),  # the answer that ends the run
    ],
)
def test_a_runs_one_statement_writes_go_on_its_loops_connection(
    agent: Any, expected: list[str]
) -> None:
    sent: list[str] = []
    stop = observe_statements(sent.append)
    try:
        status = asyncio.run(_execute(_queued(agent.name)))
    finally:
        stop()
    assert status == "completed"
    assert len(sent) == len(expected), sent
    assert all(sql.startswith(e) for sql, e in zip(sent, expected, strict=True)), sent
    assert "pai_threads_end_gate" in sent[-1]  # the last one ends the run behind the gate
    run = Run.objects.get(id=Message.objects.filter(role="assistant").latest("created_at").run_id)
    assert run.status == "completed" and run.lease_owner == ""


def test_a_connection_the_server_ended_while_idle_is_replaced_before_use() -> None:
    """A database restart between two runs of one loop costs no failed write."""
    with asyncio.Runner() as runner:
        assert runner.run(_execute(_queued(w1_agent.name))) == "completed"
        before = _loop_sessions()
        assert before, "the first run left its loop's connection open"
        _terminate(before)
        assert runner.run(_execute(_queued(w1_agent.name))) == "completed"
        after = _loop_sessions(settled=1)
    assert after and not set(after) & set(before)
    assert Run.objects.filter(status="completed").count() == 2


def test_errors_come_out_as_djangos_and_the_connection_stays_usable() -> None:
    async def scenario() -> list[Any]:
        conns = loop_connections()
        assert conns is not None
        await conns.fetchone("CREATE TEMP TABLE pai_loop_t (id int PRIMARY KEY)", [])
        await conns.fetchone("INSERT INTO pai_loop_t VALUES (1) RETURNING id", [])
        with pytest.raises(IntegrityError):
            await conns.fetchone("INSERT INTO pai_loop_t VALUES (%s) RETURNING id", [1])
        with pytest.raises(ProgrammingError):
            await conns.fetchone("SELECT no_such_column FROM pai_loop_t", [])
        # Still the same session (its temp table is there), in autocommit, idle.
        row = await conns.fetchone("SELECT count(*) FROM pai_loop_t", [])
        return [row, conns.open_connections, conns.idle_connections]

    assert asyncio.run(scenario()) == [(1,), 1, 1]


def test_a_cancelled_statement_never_leaves_a_busy_connection_behind() -> None:
    async def scenario() -> tuple[Any, int]:
        conns = loop_connections()
        assert conns is not None
        slow = asyncio.ensure_future(conns.fetchone("SELECT pg_sleep(5)", []))
        await asyncio.sleep(0.3)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        row = await asyncio.wait_for(conns.fetchone("SELECT 41 + 1", []), 5)
        return row, conns.open_connections

    row, still_open = asyncio.run(scenario())
    assert row == (42,)
    assert still_open == 1  # the busy one was closed, not kept


def test_a_loop_holds_at_most_its_size_and_statements_wait_their_turn() -> None:
    with override_settings(PAI={**settings.PAI, "LOOP_CONNECTIONS": 1}):

        async def scenario() -> tuple[list[Any], int]:
            conns = loop_connections()
            assert conns is not None and conns.size == 1
            rows = await asyncio.gather(
                *(conns.fetchone("SELECT pg_backend_pid(), pg_sleep(0.05)", []) for _ in range(4))
            )
            return rows, len(await asyncio.to_thread(_loop_sessions))

        rows, sessions = asyncio.run(scenario())
    assert len({row[0] for row in rows}) == 1  # one session served all four, in turn
    assert sessions == 1


def test_off_when_set_to_zero_and_the_run_writes_through_the_store_threads() -> None:
    with override_settings(PAI={**settings.PAI, "LOOP_CONNECTIONS": 0}):
        sent: list[str] = []
        stop = observe_statements(sent.append)
        try:
            run_id = _queued(w1_agent.name)

            async def scenario() -> tuple[Any, str]:
                return loop_connections(), await _execute(run_id)

            conns, status = asyncio.run(scenario())
        finally:
            stop()
    assert conns is None and status == "completed" and sent == []


def test_closing_leaves_no_session_and_ended_loops_are_closed_by_the_next() -> None:
    assert asyncio.run(_execute(_queued(w2_agent.name))) == "completed"
    first = _loop_sessions()
    assert len(first) == 1  # the ended loop's connection, not closed yet

    async def next_loop() -> None:
        assert loop_connections() is not None  # a new loop's first use closes the old one's

    asyncio.run(next_loop())
    assert _loop_sessions(settled=0) == []  # the new loop opened none (no statement sent)
    assert asyncio.run(_execute(_queued(w2_agent.name))) == "completed"
    assert len(_loop_sessions()) == 1
    close_loop_connections()
    assert _loop_sessions(settled=0) == []
