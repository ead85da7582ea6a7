"""The hot lookups on a partial index's rows read that index on SQLite too.

SQLite uses a partial index only when the query implies the index's condition term for
term, and it does not look at bound parameters inside an IN list: ``status IN (%s, %s,
%s)`` made a send's active-run lookup read every run of the thread through (thread,
created_at), 1.9 ms on a thread of 10,000 messages instead of 0.06 ms, growing with the
thread. The active-run index's condition is now the ``active`` column (migration 0018),
which each lookup names as the index does. These tests read
SQLite's query plan of each lookup (PostgreSQL plans with the values, and on tables this
small it rightly prefers a sequential scan, so the plan says nothing there).
"""

from __future__ import annotations

import pytest
from django.db import connection

from pai_threads.execution.recovery import find_stalled_runs
from pai_threads.models import QueueItem, Run, Thread
from pai_threads.store.rows import active_run
from pai_threads.store.sql import queued_sql
from tests.support.plans import query_plan, sent_plan

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "sqlite", reason="SQLite's partial-index matching rule"
    ),
]


@pytest.fixture
def thread() -> Thread:
    thread = Thread.objects.create(scope_key="plans", agent_name="a")
    Run.objects.bulk_create(
        Run(thread=thread, scope_key="plans", agent_name="a", status="completed") for _ in range(50)
    )
    return thread


def test_the_orms_active_run_lookup_reads_the_active_run_index(thread: Thread) -> None:
    plan = sent_plan(lambda: Run.objects.active().filter(thread=thread).first())
    assert "pai_one_active_run_per_thread" in plan


def test_a_sends_active_run_read_reads_the_active_run_index(thread: Thread) -> None:
    assert "pai_one_active_run_per_thread" in sent_plan(lambda: active_run(thread.pk))


def test_the_queue_read_reads_the_pending_queue_index(thread: Thread) -> None:
    plan = sent_plan(lambda: list(QueueItem.objects.filter(thread=thread, status="queued")))
    assert "pai_queue_pending" in plan


def test_the_queued_input_check_of_a_write_reads_the_pending_queue_index(thread: Thread) -> None:
    exists, params = queued_sql("?")
    assert "pai_queue_pending" in query_plan(f"SELECT {exists}", [thread.pk, *params])


def test_the_sweepers_stalled_run_query_reads_only_the_active_run_index(
    thread: Thread,
) -> None:
    """Migration 0018: no index of its own (WAL per run row version); the live runs are the
    rows of the active-run index, whose condition the query names."""
    plan = sent_plan(find_stalled_runs)
    assert "pai_one_active_run_per_thread" in plan
    assert "SCAN pai_threads_run\n" not in plan + "\n"
