"""Deleting a thread while a worker claims its run, on real PostgreSQL.

The claim is one statement that also inserts the run's attempt row. A delete that collected
the thread's rows before the claim committed used to delete the run and leave the new
attempt row pointing at nothing: the delete's commit failed with an IntegrityError (a 500
from ``DELETE /threads/{id}``). The delete now locks the thread's runs first, so the claim
either commits before the delete reads what to remove, or waits and finds no run.
The tests make each order happen (no timing): the claim runs from inside the delete,
just before its ``DELETE`` of the run rows.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, connections

from pai_agents.engine.store import RunNotFound
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Run, RunAttempt, Thread
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def _queued_run(identity: Identity) -> Run:
    thread = Thread.objects.create(scope_key=identity.scope_key, agent_name="echo")
    return Run.objects.create(
        thread=thread, scope_key=identity.scope_key, agent_name="echo", status="queued"
    )


def _claim_blocked_or_done(pid_box: dict[str, Any], done: threading.Event) -> None:
    """Until the claiming connection has committed or waits on a row lock (no sleep-based
    timing: PostgreSQL says which)."""
    while not done.is_set():
        pid = pid_box.get("pid")
        if pid is None:
            time.sleep(0.005)
            continue
        with connection.cursor() as cursor:
            cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
            row = cursor.fetchone()
        if row is not None and row[0] == "Lock":
            return
        time.sleep(0.005)


def test_a_claim_racing_a_thread_delete_neither_fails_nor_leaves_rows(alice: Identity) -> None:
    """The claim lands after the delete removed the run's attempt rows and before it
    removes the run (the window the IntegrityError needed): the delete succeeds, the claim
    finds no run (RunNotFound, which the worker skips), nothing of the thread is left."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: two sessions and row locks")
    run = _queued_run(alice)
    outcome: dict[str, Any] = {}
    pid_box: dict[str, Any] = {}
    done = threading.Event()

    def claim() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                pid_box["pid"] = cursor.fetchone()[0]
            ORMThreadStore().claim_run_sync(run.id, owner="racer", lease_seconds=30)
            outcome["claim"] = "claimed"
        except RunNotFound:
            outcome["claim"] = "not found"
        except Exception as exc:  # the failure this test reports
            outcome["claim"] = exc
        finally:
            connections.close_all()
            done.set()

    claimer = threading.Thread(target=claim)

    def before_run_delete(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        # The delete's own DELETE of the run rows: the claim runs just before it.
        if sql.startswith(f'DELETE FROM "{Run._meta.db_table}"') and not claimer.is_alive():
            claimer.start()
            _claim_blocked_or_done(pid_box, done)
        return execute(sql, params, many, context)

    try:
        with connection.execute_wrapper(before_run_delete):
            active = services.delete_thread(alice, run.thread_id)
    finally:
        claimer.join()
    assert active == [run.id]
    assert outcome["claim"] == "not found"
    assert not Thread.objects.filter(id=run.thread_id).exists()
    assert not Run.objects.filter(id=run.id).exists()
    assert not RunAttempt.objects.filter(run_id=run.id).exists()


def test_a_claim_committed_before_the_delete_is_deleted_with_the_thread(
    alice: Identity,
) -> None:
    """The other order: the claim (and its attempt row) committed first; the delete
    removes the run and its attempt together."""
    run = _queued_run(alice)
    claimed = ORMThreadStore().claim_run_sync(run.id, owner="first", lease_seconds=30)
    assert claimed.attempt == 1
    assert RunAttempt.objects.filter(run_id=run.id).count() == 1
    assert services.delete_thread(alice, run.thread_id) == [run.id]
    assert not RunAttempt.objects.filter(run_id=run.id).exists()
    assert not Run.objects.filter(id=run.id).exists()
