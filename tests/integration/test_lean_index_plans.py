"""Reads that lost an index of their own (issue 16, W2's WAL per run) stay index-driven.

Migration 0016 dropped the transcript's partial twin of ``pai_msg_thread_position``: a
transcript read walks the thread's position index and skips the few hidden rows. Migration
0017 dropped ``pai_run_scope``: the budget check reaches a scope's runs through its threads.
Migration 0019 dropped ``pai_thread_scope_recent``: listing a scope's threads, active and
archived together, merges two ranges of ``pai_thread_scope_archived``, each read in order.
SQLite's plans are read as the statements are sent; on PostgreSQL, whose planner rightly
prefers sequential scans on tables this small, the test only asks that an index path exists
(``enable_seqscan`` off), so a run is never found by scanning every run.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Step, Thread
from pai_threads.usage.budget import Budget, budget_check
from tests.support.plans import query_plan, sent_plan, sent_statements

pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "plans"


@pytest.fixture
def thread() -> Thread:
    """A thread of 50 answered runs, every fifth answer hidden (regenerated), and a thread
    of another scope."""
    now = timezone.now()
    other = Thread.objects.create(scope_key="other", agent_name="a")
    thread = Thread.objects.create(scope_key=SCOPE, agent_name="a")
    for owner in (other, thread):
        runs = Run.objects.bulk_create(
            Run(thread=owner, scope_key=owner.scope_key, agent_name="a", status="completed")
            for _ in range(50)
        )
        Message.objects.bulk_create(
            Message(
                message_id=f"{role}-{n}",
                thread=owner,
                scope_key=owner.scope_key,
                run=run,
                role=role,
                producer="model",
                step_index=0 if role == "assistant" else None,
                in_transcript=not (role == "assistant" and n % 5 == 0),
            )
            for n, run in enumerate(runs)
            for role in ("user", "assistant")
        )
        Step.objects.bulk_create(
            Step(run=run, index=0, started_at=now, finished_at=now) for run in runs
        )
    return thread


@pytest.mark.skipif(connection.vendor != "sqlite", reason="reads SQLite's plan as sent")
def test_a_transcript_page_walks_the_threads_position_index(thread: Thread) -> None:
    transcript = Message.objects.filter(thread=thread, in_transcript=True).order_by("-id")
    newest = sent_plan(lambda: list(transcript[:21]))
    older = sent_plan(lambda: list(transcript.filter(id__lt=10**9)[:21]))
    for plan in (newest, older):
        assert "USING INDEX pai_msg_thread_position (thread_id=?" in plan
        assert "TEMP B-TREE" not in plan  # read in thread order, not sorted


def test_the_budget_check_finds_a_scopes_runs_through_its_threads(thread: Thread) -> None:
    budget = Budget(max_tokens=1, window="total")
    plan = sent_plan(lambda: budget_check(SCOPE, budget))
    if connection.vendor == "sqlite":
        assert "SEARCH pai_threads_run USING INDEX pai_run_thread_created (thread_id=?)" in plan
        assert "SEARCH pai_threads_thread USING COVERING INDEX pai_thread_scope" in plan
    else:
        assert "pai_run_thread_created" in plan
    assert "SCAN pai_threads_run" not in plan and "Seq Scan on pai_threads_run" not in plan
    assert "SCAN pai_threads_step" not in plan and "Seq Scan on pai_threads_step" not in plan


def test_the_budget_check_counts_only_the_scopes_steps(thread: Thread) -> None:
    Step.objects.filter(run__thread=thread).update(usage={"inputTokens": 1, "outputTokens": 1})
    exceeded = budget_check(SCOPE, Budget(max_tokens=100, window="total"))
    assert exceeded is not None and exceeded.used == 100
    assert budget_check("other", Budget(max_tokens=1, window="total")) is None


def test_listing_a_scopes_threads_merges_two_ordered_ranges() -> None:
    """Active and archived threads together, newest first, across pages, from two bounded
    reads of the one recency index (no sort of the scope's threads)."""
    now = timezone.now()
    made = Thread.objects.bulk_create(
        Thread(scope_key=SCOPE, agent_name="a", archived=n % 3 == 0) for n in range(12)
    )
    for n, row in enumerate(made):  # interleaved in time: archived every third
        Thread.objects.filter(pk=row.pk).update(updated_at=now - timezone.timedelta(minutes=n))
    Thread.objects.create(scope_key="other", agent_name="a")
    identity = Identity(scope_key=SCOPE, data={})
    seen: list[str] = []
    token = None
    while True:
        page = services.list_threads(identity, limit=5, page_token=token)
        seen += [t.id for t in page.items]
        token = page.next_page_token
        if token is None:
            break
    assert seen == [t.id for t in made]  # newest first, both kinds, each once

    statements = sent_statements(lambda: services.list_threads(identity, limit=5))
    assert len(statements) == 2
    for sql, params in statements:
        plan = query_plan(sql, params)
        assert "pai_thread_scope_archived" in plan
        if connection.vendor == "sqlite":
            assert "TEMP B-TREE" not in plan  # read in the index's order, not sorted
        else:
            assert "Sort" not in plan
