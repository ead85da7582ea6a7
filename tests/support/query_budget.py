"""Counting a run's SQL like the benchmark does, on this test's threads only.

Every statement Django sends is counted, BEGIN and COMMIT added back (as pg_stat_statements
counts them), on the test's main thread, on the measurement's own store threads and on the
worker threads of the run's own event loop (both named :data:`WORKERS`), so a sweeper or
another test's background loop in the same process never pollutes the count. The same counting as
tests/integration/test_query_budget.py, public so the lifecycle budget
(tests/integration/test_query_budget_lifecycle.py) measures exactly the same way.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.test import override_settings

from benchmarks.counting import Counts, QueryCounter
from benchmarks.workloads.common import USER_MESSAGE
from pai_agents.agent import AgentDefinition
from pai_threads import services
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Run
from pai_threads.store.db import StoreThreads, swap_store_threads
from pai_threads.store.loop_connections import observe_statements

__all__ = [
    "WORKERS",
    "BudgetCounter",
    "Measured",
    "counting",
    "execute",
    "listing",
    "measure_run",
    "spent",
]

WORKERS = "pai-query-budget"


def counted_thread() -> bool:
    thread = threading.current_thread()
    return thread is threading.main_thread() or thread.name.startswith(WORKERS)


class BudgetCounter(QueryCounter):
    """The benchmark's counter, limited to this test's threads."""

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if not counted_thread():
            return execute(sql, params, many, context)
        return super().__call__(execute, sql, params, many, context)

    def count_end(self, *, committed: bool) -> None:
        self._count_end(committed=committed)

    def count_loop_statement(self, sql: str) -> None:
        if counted_thread():
            super().count_loop_statement(sql)

    def on_connection_created(self, **kwargs: Any) -> None:
        self._on_connection_created(**kwargs)


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[BudgetCounter]:
    counter = BudgetCounter()
    commit, rollback = BaseDatabaseWrapper.commit, BaseDatabaseWrapper.rollback

    def counted_commit(self: BaseDatabaseWrapper) -> None:
        commit(self)
        if counted_thread():
            counter.count_end(committed=True)

    def counted_rollback(self: BaseDatabaseWrapper) -> None:
        rollback(self)
        if counted_thread():
            counter.count_end(committed=False)

    monkeypatch.setattr(BaseDatabaseWrapper, "commit", counted_commit)
    monkeypatch.setattr(BaseDatabaseWrapper, "rollback", counted_rollback)
    connection_created.connect(counter.on_connection_created, weak=False)
    stop_observing = observe_statements(counter.count_loop_statement)
    connection.execute_wrappers.append(counter)  # the test thread's connection exists already
    # Store threads of this measurement: their connections open (and get the counter) now.
    threads = StoreThreads(4, name=WORKERS)
    previous = swap_store_threads(threads)
    try:
        yield counter
    finally:
        swap_store_threads(previous)
        threads.stop()
        connection.execute_wrappers.remove(counter)
        connection_created.disconnect(counter.on_connection_created)
        stop_observing()


def execute(run_id: str) -> str:
    """``aexecute_run`` on a fresh loop whose worker threads (store calls) are counted."""

    async def run() -> str:
        asyncio.get_running_loop().set_default_executor(
            ThreadPoolExecutor(max_workers=4, thread_name_prefix=WORKERS)
        )
        outcome = await aexecute_run(run_id)
        assert outcome is not None
        return outcome.status

    return asyncio.run(run())


def spent(counter: QueryCounter, before: Counts) -> tuple[int, int]:
    """(statements incl. BEGIN/COMMIT, commits) since ``before``."""
    counts = counter.snapshot() - before
    return counts.pg_statements, counts.transactions


def listing(counter: QueryCounter, before: Counts) -> str:
    """The statements sent since ``before``, for a failure message."""
    counts = counter.snapshot() - before
    return "\n".join(f"{n} x {sql[:160]}" for sql, n in counts.by_sql.items())


@dataclass(frozen=True)
class Measured:
    """What one run cost: (statements incl. BEGIN/COMMIT, commits) per phase."""

    run: Run
    accept: tuple[int, int]
    execution: tuple[int, int]
    listing: str  # the execution's statements, for a failure message

    @property
    def phases(self) -> dict[str, tuple[int, int]]:
        return {"accept": self.accept, "execution": self.execution}


def measure_run(monkeypatch: pytest.MonkeyPatch, agent: AgentDefinition) -> Measured:
    """Send the benchmark's user message to a new thread of ``agent`` and execute the run,
    counting both phases, after two warm-up runs (first-use work is not the budget)."""
    identity = Identity(scope_key="budget", data={})
    pai = {**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], agent]}
    with override_settings(PAI=pai):
        for _ in range(2):
            thread = services.create_thread(identity, agent=agent.name)
            run = services.send(identity, thread.id, USER_MESSAGE, dispatch=False).run
            assert run is not None and execute(run.id) == "completed"
        thread = services.create_thread(identity, agent=agent.name)
        with counting(monkeypatch) as counter:
            before = counter.snapshot()
            sent = services.send(identity, thread.id, USER_MESSAGE, dispatch=False)
            accept, accepted = spent(counter, before), counter.snapshot()
            assert sent.run is not None
            assert execute(sent.run.id) == "completed"
            execution = spent(counter, accepted)
            statements = listing(counter, accepted)
    return Measured(Run.objects.get(id=sent.run.id), accept, execution, statements)
