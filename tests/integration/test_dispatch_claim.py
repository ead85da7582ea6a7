"""A dispatched run is claimed on the dispatching thread, then handed to the run loop.

Both executors end in :func:`pai_threads.executors.run_on_loop.run_on_background_loop`: the
in-process one right after the send's commit (the request's thread), a Celery task on its
pool thread. The claim is the one the loop would make (same lease, attempt row, owner: the
loop's thread), so the loop starts the engine without a store hop first (issue 16, time to
first token). Where the dispatching thread cannot claim (an event loop runs on it, or the
claim fails), the loop claims as before; a run that is not claimable is not executed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import OperationalError, connection

from pai_threads import services
from pai_threads.execution.execute import claim_now, worker_name
from pai_threads.executors import run_on_loop
from pai_threads.executors.loop import background_loop
from pai_threads.executors.run_on_loop import run_on_background_loop
from pai_threads.identity import Identity
from pai_threads.models import Run, RunAttempt
from pai_threads.tasks import execute_run
from tests.support.inline_runs import send_text

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 30.0


def _sent(identity: Identity, *, dispatch: bool = False) -> str:
    thread = services.create_thread(identity)
    return send_text(identity, thread.id, "What is 6 * 7?", dispatch=dispatch)


@contextmanager
def loop_held() -> Iterator[None]:
    """The run loop blocked until the block ends: whatever it would do waits."""
    entered, release = threading.Event(), threading.Event()

    async def hold() -> None:
        entered.set()
        release.wait(TIMEOUT)  # blocks the loop's thread on purpose

    held = background_loop().submit(hold())
    assert entered.wait(TIMEOUT)
    try:
        yield
    finally:
        release.set()
        held.result(TIMEOUT)


def _loop_owner() -> str:
    return worker_name(background_loop().native_id)


def test_a_send_leaves_its_run_claimed_for_the_loop_before_the_loop_runs(
    alice: Identity,
) -> None:
    """The thread executor's dispatch (after the send's commit) claims on the sending thread:
    while the loop is busy the run is already running, leased to the loop's thread, with
    its attempt row; released, the loop executes it without claiming again."""
    with loop_held():
        run_id = _sent(alice, dispatch=True)
        run = Run.objects.get(pk=run_id)
        assert run.status == Run.Status.RUNNING
        assert run.lease_owner == _loop_owner()
        assert list(RunAttempt.objects.filter(run_id=run_id).values_list("worker", flat=True)) == [
            _loop_owner()
        ]
    outcome = _ended_status(run_id)
    assert outcome == Run.Status.COMPLETED
    assert RunAttempt.objects.filter(run_id=run_id).count() == 1


def _ended_status(run_id: str) -> str:
    """Wait for ``run_id`` to end (dispatched elsewhere); its status."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        status = Run.objects.values_list("status", flat=True).get(pk=run_id)
        if status not in (Run.Status.QUEUED, Run.Status.RUNNING):
            return str(status)
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} did not end")


def test_a_run_that_is_not_claimable_is_not_executed(alice: Identity) -> None:
    """Leased by another worker: no second claim, no execution, the lease untouched."""
    run_id = _sent(alice)
    assert claim_now(run_id, owner="elsewhere:1:1") is not None
    assert run_on_background_loop(run_id).result(TIMEOUT) is None
    run = Run.objects.get(pk=run_id)
    assert (run.status, run.lease_owner) == (Run.Status.RUNNING, "elsewhere:1:1")
    assert RunAttempt.objects.filter(run_id=run_id).count() == 1


def test_a_claim_that_fails_on_the_dispatching_thread_is_made_by_the_loop(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unavailable(run_id: str, *, owner: str) -> None:
        raise OperationalError("the database is away")

    monkeypatch.setattr(run_on_loop, "claim_now", unavailable)
    run_id = _sent(alice)
    outcome = run_on_background_loop(run_id).result(TIMEOUT)
    assert outcome is not None and outcome.status == "completed"
    assert list(RunAttempt.objects.filter(run_id=run_id).values_list("worker", flat=True)) == [
        _loop_owner()
    ]


def test_from_an_event_loop_the_run_loop_claims(alice: Identity) -> None:
    """A thread running an event loop cannot make synchronous queries: the loop claims."""
    run_id = _sent(alice)

    async def dispatch_from_a_coroutine() -> object:
        return run_on_background_loop(run_id)

    execution = asyncio.run(dispatch_from_a_coroutine())
    outcome = execution.result(TIMEOUT)  # type: ignore[attr-defined]
    assert outcome is not None and outcome.status == "completed"


def test_the_celery_task_claims_then_waits_without_a_connection(alice: Identity) -> None:
    """The task's pool thread claims, then only waits for the run: as at the end of a
    request its connection goes back (CONN_MAX_AGE 0: closed, or returned to the pool)
    instead of idling for the run's whole length (a pool would run dry)."""
    run_id = _sent(alice)
    assert execute_run(run_id) == "completed"
    assert connection.connection is None
    assert RunAttempt.objects.filter(run_id=run_id).count() == 1


def test_the_celery_task_keeps_a_persistent_connection(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With persistent connections (CONN_MAX_AGE, no pool) the task's thread keeps its
    connection for the next task instead of reconnecting for every run."""
    if connection.settings_dict.get("OPTIONS", {}).get("pool"):
        pytest.skip("a pooled connection is always returned (CONN_MAX_AGE must be 0)")
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 600)
    connection.close()  # the next connection takes the setting
    run_id = _sent(alice)
    kept = connection.connection
    assert kept is not None
    assert execute_run(run_id) == "completed"
    assert connection.connection is kept
