"""The attempt history (issue 12, point 1): every claim of a run is a RunAttempt row, ended by
the write that ends it, and the run page shows them with their steps.

Runs execute on the ORM store (SQLite or PostgreSQL, whichever the suite runs on); the
lease-loss cases drive the store as two workers would (LC-033: a worker whose lease expired
or was taken over writes nothing, so its attempt's record does not change either).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from pai_agents.engine.store import LeaseLost, RunOutcome
from pai_threads import services
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import PendingAction, Run, RunAttempt, Step
from pai_threads.store.attempts import record_lost_leases
from pai_threads.store.thread_store import ORMThreadStore
from tests.support.durable_harness import wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)

IDENTITY = Identity(scope_key="user:attempts")


@pytest.fixture(autouse=True)
def agents(settings: Any) -> None:
    settings.PAI = {
        **settings.PAI,
        "AGENTS": [*settings.PAI["AGENTS"], "tests.support.agents.toolbox"],
    }


def _queued(text: str) -> Run:
    thread = services.create_thread(IDENTITY, agent="toolbox")
    message = {"role": "user", "parts": [{"type": "text", "text": text}]}
    sent = services.send(IDENTITY, thread.id, message, dispatch=False)
    assert sent.run is not None
    return sent.run


def _execute(run_id: str) -> Run:
    asyncio.run(aexecute_run(run_id))
    return Run.objects.get(id=run_id)


def _history(run: Run) -> list[tuple[int, int, str]]:
    return [
        (a.number, a.lease_token, a.ended)
        for a in RunAttempt.objects.filter(run=run).order_by("number")
    ]


def _expire(run_id: str) -> None:
    Run.objects.filter(id=run_id).update(lease_expires_at=timezone.now() - timedelta(seconds=5))


def _page(run: Run) -> str:
    User.objects.create_superuser("op", "op@example.com", "pw")
    client = Client()
    client.login(username="op", password="pw")
    url = reverse("admin:pai_threads_run_change", args=[quote(run.id)])
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_a_normal_run_records_one_completed_attempt() -> None:
    run = _execute(_queued("use tools").id)
    assert run.status == Run.Status.COMPLETED
    (attempt,) = RunAttempt.objects.filter(run=run)
    assert (attempt.number, attempt.lease_token, attempt.ended) == (1, 1, "completed")
    assert attempt.worker and attempt.ended_at is not None
    assert attempt.claimed_at <= attempt.ended_at <= run.finished_at
    assert set(Step.objects.filter(run=run).values_list("attempt", flat=True)) == {1}


def test_an_approval_wait_ends_the_attempt_and_the_resume_is_a_new_one() -> None:
    run = _execute(_queued("approval please").id)
    assert run.status == Run.Status.WAITING
    assert _history(run) == [(1, 1, "waiting")]
    action = PendingAction.objects.get(run=run)
    services.submit_action(IDENTITY, action.id, {"approved": True}, dispatch=False)
    run = _execute(run.id)
    assert run.status == Run.Status.COMPLETED
    assert _history(run) == [(1, 1, "waiting"), (2, 2, "completed")]
    # Each step records the attempt that committed it.
    steps = dict(Step.objects.filter(run=run).values_list("index", "attempt"))
    assert steps == {0: 1, 1: 2}

    page = _page(run)
    assert "resumed after attempt 1 waited" in page
    assert "waiting for an approval or a client tool" in page
    assert page.index("id='attempt-1'") < page.index("step 0 · attempt 1")
    assert page.index("id='attempt-2'") < page.index("step 1 · attempt 2")


def test_the_thread_executor_records_the_attempt() -> None:
    """Dispatched as the product does (PAI EXECUTOR "thread" in the test settings)."""
    thread = services.create_thread(IDENTITY, agent="toolbox")
    sent = services.send(IDENTITY, thread.id, {"parts": [{"type": "text", "text": "hi"}]})
    assert sent.run is not None
    run = wait_terminal(sent.run.id)
    assert run.status == Run.Status.COMPLETED
    assert _history(run) == [(1, 1, "completed")]


def test_a_fenced_out_late_write_changes_no_history() -> None:
    """LC-033: w1's lease expires, the sweeper records it lost, w2 takes over; w1's late
    end is refused and leaves both records as they were."""
    run = _queued("use tools")
    store = ORMThreadStore()
    stale = store.claim_run_sync(run.id, owner="w1", lease_seconds=60).lease
    _expire(run.id)
    # Expired but not taken over yet: w1 may not end the run, so its attempt stays open.
    with pytest.raises(LeaseLost):
        store.finish_run_sync(stale, RunOutcome(status="completed"))
    assert _history(run) == [(1, 1, "")]

    assert record_lost_leases([run.id], timezone.now()) == 1
    fresh = store.claim_run_sync(run.id, owner="w2", lease_seconds=60).lease
    before = list(RunAttempt.objects.filter(run=run).order_by("number").values())
    assert [(a["worker"], a["ended"]) for a in before] == [("w1", "lease_lost"), ("w2", "")]

    with pytest.raises(LeaseLost):
        store.finish_run_sync(stale, RunOutcome(status="failed", error={"type": "Late"}))
    assert list(RunAttempt.objects.filter(run=run).order_by("number").values()) == before

    store.finish_run_sync(fresh, RunOutcome(status="completed"))
    assert _history(Run.objects.get(id=run.id)) == [(1, 1, "lease_lost"), (2, 2, "completed")]
    page = _page(run)
    assert "recovered: took over from attempt 1" in page and "the sweeper re-dispatched" in page


def test_a_takeover_without_the_sweeper_ends_the_open_attempt() -> None:
    run = _queued("use tools")
    store = ORMThreadStore()
    store.claim_run_sync(run.id, owner="w1", lease_seconds=60)
    _expire(run.id)
    store.claim_run_sync(run.id, owner="w2", lease_seconds=60)
    first, second = RunAttempt.objects.filter(run=run).order_by("number")
    assert (first.worker, first.ended, second.worker, second.ended) == (
        "w1",
        "taken_over",
        "w2",
        "",
    )
    assert first.ended_at == second.claimed_at


def test_a_slow_worker_that_renews_its_expired_lease_ends_its_own_attempt() -> None:
    """The sweeper marked the lease lost, but nobody took over and the heartbeat renewed
    it (the token alone decides): the worker's end replaces the mark."""
    run = _queued("use tools")
    store = ORMThreadStore()
    lease = store.claim_run_sync(run.id, owner="w1", lease_seconds=60).lease
    _expire(run.id)
    record_lost_leases([run.id], timezone.now())
    assert _history(run) == [(1, 1, "lease_lost")]
    store.heartbeat_sync(lease, lease_seconds=60)
    store.finish_run_sync(lease, RunOutcome(status="cancelled"))
    assert _history(run) == [(1, 1, "cancelled")]


def test_the_history_costs_no_round_trip_on_postgresql() -> None:
    """The hot path (docs/benchmarks.md): on PostgreSQL the attempt's INSERT is part of the
    claim statement and its end part of the fencing UPDATE; elsewhere each is one statement
    of its own, in the claim's or the end's transaction."""
    run = _queued("use tools")
    store = ORMThreadStore()
    with CaptureQueriesContext(connection) as claim:
        lease = store.claim_run_sync(run.id, owner="w1", lease_seconds=60).lease
    with CaptureQueriesContext(connection) as end:
        store.finish_run_sync(lease, RunOutcome(status="completed"))
    assert _history(run) == [(1, 1, "completed")]
    attempts, runs = (connection.ops.quote_name(m._meta.db_table) for m in (RunAttempt, Run))
    for captured, write in ((claim, "INSERT INTO"), (end, "UPDATE")):
        touching = [q["sql"] for q in captured.captured_queries if attempts in q["sql"]]
        (statement,) = touching
        if connection.vendor == "postgresql":
            assert statement.startswith("WITH") and f"UPDATE {runs}" in statement
        else:
            assert statement.startswith(f"{write} {attempts}")
