"""A checkpointed step's commit in one statement on PostgreSQL (store.step_writes).

Every streamed answer longer than a checkpoint ends by committing its open row. On
PostgreSQL that is one statement: the fencing UPDATE (only while the open row exists, behind
the end gate when the run ends), the row's UPDATE and the Step INSERT. When it writes
nothing (the gate closed, the lease lost, the open row gone) the transaction does the work,
so nothing of the statement may remain.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from pai_agents import ScriptedModel, ScriptedStep, define_agent
from pai_agents.engine.store import LeaseLost, RunOutcome
from pai_threads import services
from pai_threads.execution.execute import claim_now
from pai_threads.identity import Identity
from pai_threads.models import Message, QueueItem, Run, Step
from pai_threads.store.fenced_writes import outcome_changes, replace_statement
from pai_threads.store.step_writes import step_rows
from pai_threads.store.thread_store import ORMThreadStore
from tests.support.step_commits import only_step

pytestmark = [pytest.mark.django_db(transaction=True)]

AGENT = "replace-commit"
IDENTITY = Identity(scope_key="test:replace-commit", data={})
STREAMING = {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "so"}]}
DONE = {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "so far"}]}


@pytest.fixture(autouse=True)
def _agent() -> Iterator[None]:
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement commit is PostgreSQL's")
    agent = define_agent(
        AGENT, instructions="x", model=ScriptedModel(steps=[ScriptedStep.reply("ok")])
    )
    with override_settings(PAI={**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], agent]}):
        yield


def _checkpointed() -> tuple[str, ORMThreadStore, Any]:
    """A claimed run of a new thread whose step 0 has an open row (one checkpoint)."""
    thread = services.create_thread(IDENTITY, agent=AGENT)
    run = services.send(IDENTITY, thread.id, _user("first"), dispatch=False).run
    assert run is not None
    claimed = claim_now(run.id, owner="replace-test")
    assert claimed is not None
    store, lease = claimed.store, claimed.claim.lease
    store.checkpoint_message_sync(lease, message=STREAMING, step_index=0)
    return thread.id, store, lease


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "text": text}]}


def _commit(store: ORMThreadStore, lease: Any, outcome: RunOutcome | None) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        store.commit_step_sync(
            lease, message=DONE, step=only_step("a1"), outcome=outcome, replace_open=True
        )  # type: ignore[arg-type]
    return [q["sql"] for q in queries.captured_queries]


def test_the_end_of_a_checkpointed_answer_is_one_statement_behind_the_gate() -> None:
    thread_id, store, lease = _checkpointed()
    sent = _commit(store, lease, RunOutcome(status="completed"))
    assert len(sent) == 1 and "pai_threads_end_gate" in sent[0], sent
    run = Run.objects.get(thread_id=thread_id)
    assert (run.status, run.step_count, run.lease_owner) == ("completed", 1, "")
    (row,) = Message.objects.filter(run=run, role="assistant")
    assert (row.status, row.parts) == (Message.Status.COMMITTED, DONE["parts"])
    step = Step.objects.get(run=run)
    assert (step.index, step.message_id, step.attempt) == (0, row.pk, 1)
    assert run.attempts.get().ended_at is not None  # the attempt ended with the run


def test_a_step_that_does_not_end_the_run_is_one_statement_without_the_gate() -> None:
    thread_id, store, lease = _checkpointed()
    sent = _commit(store, lease, None)
    assert len(sent) == 1 and "pai_threads_end_gate" not in sent[0], sent
    run = Run.objects.get(thread_id=thread_id)
    assert (run.status, run.step_count) == ("running", 1)
    assert Message.objects.get(run=run, role="assistant").status == Message.Status.COMMITTED


def test_queued_input_closes_the_gate_and_the_transaction_admits_it() -> None:
    thread_id, store, lease = _checkpointed()
    queued = services.send(IDENTITY, thread_id, _user("second"), dispatch=False, policy="queue")
    assert queued.queue_item is not None
    sent = _commit(store, lease, RunOutcome(status="completed"))
    assert sent[0].startswith("WITH pai_fence") and len(sent) > 1  # refused, then the txn
    runs = list(Run.objects.filter(thread_id=thread_id).order_by("created_at"))
    assert len(runs) == 2 and runs[0].status == "completed"
    assert QueueItem.objects.get(pk=queued.queue_item.pk).status != QueueItem.Status.QUEUED
    # Nothing of the refused statement stayed: one answer, one Step row.
    assert Message.objects.filter(run=runs[0], role="assistant").count() == 1
    assert runs[0].steps.count() == 1
    _await_background_run(runs[1].id)


def _await_background_run(run_id: str) -> None:
    """The admitted run executes in the background: let it end before the flush."""
    import time

    deadline = time.monotonic() + 10
    while Run.objects.get(id=run_id).active and time.monotonic() < deadline:
        time.sleep(0.02)


def test_without_its_open_row_the_statement_writes_nothing_at_all() -> None:
    """The fencing UPDATE is conditional on the open row: a step whose row is gone must not
    leave the run changed by a statement that returned nothing."""
    thread_id, store, lease = _checkpointed()
    Message.objects.filter(message_id="a1").delete()
    before = Run.objects.get(thread_id=thread_id)
    rows = step_rows(lease, DONE, only_step("a1"), RunOutcome(status="completed"))  # type: ignore[arg-type]
    assert rows.run_changes["status"] == outcome_changes(RunOutcome(status="completed"))["status"]
    sql, params = replace_statement(lease, rows.run_changes, rows.fields, rows.step, ends=True)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        assert cursor.fetchone() is None
    after = Run.objects.get(thread_id=thread_id)
    assert (after.status, after.step_count, after.lease_token) == (
        before.status,
        before.step_count,
        before.lease_token,
    )
    assert not Step.objects.filter(run=after).exists()
    assert after.attempts.get().ended_at is None
    # The store's commit then inserts the message in its transaction.
    store.commit_step_sync(
        lease, message=DONE, step=only_step("a1"), outcome=RunOutcome(status="completed"),
        replace_open=True,
    )  # type: ignore[arg-type]  # fmt: skip
    assert Message.objects.get(message_id="a1").status == Message.Status.COMMITTED
    assert Run.objects.get(thread_id=thread_id).status == "completed"


def test_a_lost_lease_writes_nothing_and_raises() -> None:
    thread_id, store, lease = _checkpointed()
    Run.objects.filter(thread_id=thread_id).update(lease_token=lease.token + 1)
    with pytest.raises(LeaseLost):
        _commit(store, lease, RunOutcome(status="completed"))
    assert Message.objects.get(message_id="a1").status == Message.Status.OPEN
    assert not Step.objects.exists()


def test_the_run_loop_sends_it_on_its_own_connection() -> None:
    from pai_threads.store.loop_connections import close_loop_connections, observe_statements

    thread_id, store, lease = _checkpointed()
    sent: list[str] = []
    stop = observe_statements(sent.append)
    try:
        asyncio.run(
            store.commit_step(
                lease,
                message=DONE,  # type: ignore[arg-type]
                step=only_step("a1"),
                outcome=RunOutcome(status="completed"),
                replace_open=True,
            )
        )
    finally:
        stop()
        close_loop_connections()
    assert len(sent) == 1 and "pai_threads_end_gate" in sent[0]
    assert Run.objects.get(thread_id=thread_id).status == "completed"
