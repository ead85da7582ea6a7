"""A run's last step ends it in one autocommit statement on PostgreSQL, behind the end gate
(pai_threads.store.step_writes, migration 0020).

The gate takes the thread lock inside the statement and then reads the queue with a fresh
snapshot: a send that queued input while the ending statement waited for the lock is seen,
the statement stores nothing and the run ends in the transaction that admits that input. If
the queue were read with the statement's own snapshot (taken before the lock wait), the
input would stay queued with no run to admit it: the race these tests hold open.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, connections, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from pai_agents import ScriptedModel, ScriptedStep, define_agent
from pai_threads import services
from pai_threads.execution.execute import claim_now
from pai_threads.identity import Identity
from pai_threads.models import Message, QueueItem, Run
from tests.support.step_commits import commit_only_step

pytestmark = [pytest.mark.django_db(transaction=True)]

AGENT = "end-gate"
IDENTITY = Identity(scope_key="test:end-gate", data={"userId": "gate"})


@pytest.fixture(autouse=True)
def _agent() -> Iterator[None]:
    if connection.vendor != "postgresql":
        pytest.skip("the end gate is PostgreSQL's (SQLite serializes every write)")
    agent = define_agent(
        AGENT, instructions="x", model=ScriptedModel(steps=[ScriptedStep.reply("ok")])
    )
    with override_settings(PAI={**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], agent]}):
        yield
        # An admitted run executes in the background: let it end before the tables are
        # flushed (a TRUNCATE racing its last statement is a deadlock PostgreSQL reports).
        deadline = time.monotonic() + 10
        while _executing() and time.monotonic() < deadline:
            time.sleep(0.02)


def _executing() -> bool:
    """A run of the in-process executor has not ended (the tests' own claims excluded)."""
    active = (Run.Status.QUEUED, Run.Status.RUNNING)
    return Run.objects.filter(status__in=active).exclude(lease_owner="gate-test").exists()


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "text": text}]}


def _claimed_run() -> tuple[str, Any]:
    thread = services.create_thread(IDENTITY, agent=AGENT)
    run = services.send(IDENTITY, thread.id, _user("first"), dispatch=False).run
    assert run is not None
    claimed = claim_now(run.id, owner="gate-test")
    assert claimed is not None
    return thread.id, claimed


def _end(claimed: Any) -> None:
    """Commit the run's last step with outcome ``completed``, as the engine's final write."""
    answer = {"id": "msg_answer", "role": "assistant", "parts": [{"type": "text", "text": "a"}]}
    commit_only_step(claimed.store, claimed.claim.lease, answer)


def _input_text(run: Run) -> str:
    row = Message.objects.get(run=run, role="user")
    return str(row.parts[0]["text"])


def _backends_waiting_for_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()"
        )
        return int(cursor.fetchone()[0])


def test_an_idle_end_is_one_statement_without_a_transaction() -> None:
    thread_id, claimed = _claimed_run()
    with CaptureQueriesContext(connection) as queries:
        _end(claimed)
    sent = [q["sql"] for q in queries.captured_queries]
    assert len(sent) == 1 and "pai_threads_end_gate" in sent[0]
    run = Run.objects.get(thread_id=thread_id)
    assert run.status == "completed" and not run.active
    assert Message.objects.filter(run=run, role="assistant").count() == 1


def test_input_queued_before_the_end_is_admitted_by_the_ending_transaction() -> None:
    thread_id, claimed = _claimed_run()
    queued = services.send(IDENTITY, thread_id, _user("second"), dispatch=False, policy="queue")
    assert queued.queue_item is not None
    _end(claimed)
    runs = list(Run.objects.filter(thread_id=thread_id).order_by("created_at"))
    assert len(runs) == 2 and runs[0].status == "completed"
    assert _input_text(runs[1]) == "second"  # admitted (the executor may be running it)
    assert QueueItem.objects.get(pk=queued.queue_item.pk).status != QueueItem.Status.QUEUED
    # The gate refused first: nothing of its statement stayed (one answer, one Step row).
    assert Message.objects.filter(run=runs[0], role="assistant").count() == 1
    assert runs[0].steps.count() == 1


def test_input_queued_while_the_end_waits_for_the_thread_lock_is_admitted() -> None:
    thread_id, claimed = _claimed_run()
    locked, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def send_holding_the_lock() -> None:
        try:
            with transaction.atomic():  # the send's locking path, its commit held back
                services.send(IDENTITY, thread_id, _user("second"), dispatch=False, policy="queue")
                locked.set()
                release.wait(10)
        except BaseException as exc:  # reported by the test below
            errors.append(exc)
            locked.set()
        finally:
            connections.close_all()

    def end() -> None:
        try:
            _end(claimed)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    sender = threading.Thread(target=send_holding_the_lock)
    sender.start()
    assert locked.wait(10)
    ender = threading.Thread(target=end)
    ender.start()
    deadline = time.monotonic() + 10
    while _backends_waiting_for_a_lock() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _backends_waiting_for_a_lock() == 1  # the ending statement waits in the gate
    release.set()
    sender.join(10)
    ender.join(10)
    assert not errors, errors
    runs = list(Run.objects.filter(thread_id=thread_id).order_by("created_at"))
    assert len(runs) == 2 and runs[0].status == "completed"
    assert _input_text(runs[1]) == "second"  # admitted (the executor may be running it)
    item = QueueItem.objects.get(thread_id=thread_id)
    assert item.status != QueueItem.Status.QUEUED


def test_inside_a_callers_transaction_the_end_commits_with_it() -> None:
    """A closed gate raises nothing, so the gated statement may run in a caller's
    transaction too; the run's end is the caller's to commit or roll back."""
    thread_id, claimed = _claimed_run()
    queued = services.send(IDENTITY, thread_id, _user("second"), dispatch=False, policy="queue")
    with transaction.atomic():
        _end(claimed)  # the gate is closed (queued input): the locking path, as a savepoint
        assert Run.objects.filter(thread_id=thread_id).count() == 2
        transaction.set_rollback(True)
    assert Run.objects.get(thread_id=thread_id).status == "running"
    assert QueueItem.objects.get(pk=queued.queue_item.pk).status == QueueItem.Status.QUEUED
