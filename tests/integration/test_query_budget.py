"""The SQL budget of a simple run, pinned (docs/benchmarks.md, W1 and W2 at 0 messages).

A run costs a fixed number of statements and commits, whatever the machine: these tests
count them exactly, so a change that adds a query to the hot path (a read-back, a check per
step, a savepoint) fails here and has to be argued for. When a change *removes* statements,
lower the pinned numbers and regenerate docs/benchmarks.md (``python -m benchmarks``).

Counted like the benchmark (:mod:`benchmarks.counting`): every statement Django sends,
BEGIN and COMMIT added back (as pg_stat_statements counts them), on the test's thread and
on the worker threads of the run's own event loop, so a sweeper or another test's
background loop in the same process never pollutes the count.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from benchmarks.agents import w1_agent, w2_agent
from benchmarks.workloads.common import USER_MESSAGE
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, Run
from tests.support.query_budget import execute, measure_run

pytestmark = pytest.mark.django_db(transaction=True)

# (statements + BEGIN/COMMIT, commits) per phase and database. The five commits of the tool
# round trip are the design's budget (accept, claim, step 1 with the call, tool result,
# answer + completion); the one-step answer needs three. The attempt history (RunAttempt)
# costs PostgreSQL nothing (CTEs of the claim and of the ending UPDATE); on SQLite the claim
# becomes a transaction with its attempt INSERT (+3: BEGIN, INSERT, COMMIT; no more commits)
# and the run's end one more UPDATE in its transaction (+1). On PostgreSQL a send to an idle
# thread is the thread's read and one statement (pai_threads.store.fused_send) instead of a
# transaction of four (7 -> 2: no BEGIN/COMMIT, no separate touch, active-run read, inserts),
# and the claim returns the thread's context window too (no separate read: 8 -> 7, 6 -> 5).
# The run's last step ends it in one autocommit statement behind the end gate
# (pai_threads.store.step_writes: no BEGIN, thread lock or COMMIT: 7 -> 4, 5 -> 2). A send
# to a thread this process created or read skips the thread's read (store.thread_headers:
# accept 7 -> 6 on SQLite, 2 -> 1 on PostgreSQL).
BUDGET: dict[str, dict[str, dict[str, tuple[int, int]]]] = {
    "sqlite": {
        "tool round trip": {"accept": (6, 1), "execution": (17, 4)},
        "one-step answer": {"accept": (6, 1), "execution": (11, 2)},
    },
    "postgresql": {
        "tool round trip": {"accept": (1, 1), "execution": (4, 4)},
        "one-step answer": {"accept": (1, 1), "execution": (2, 2)},
    },
}


def _queued_run() -> Run:
    """A run queued by a send on a new thread of the default agent, not dispatched."""
    identity = Identity(scope_key="budget", data={})
    thread = services.create_thread(identity)
    run = services.send(identity, thread.id, USER_MESSAGE, dispatch=False).run
    assert run is not None
    return run


@pytest.mark.parametrize(
    ("workload", "agent", "steps"),
    [("tool round trip", w1_agent, 2), ("one-step answer", w2_agent, 1)],
)
def test_a_simple_run_spends_its_pinned_sql_budget(
    monkeypatch: pytest.MonkeyPatch, workload: str, agent: Any, steps: int
) -> None:
    measured = measure_run(monkeypatch, agent)
    expected = BUDGET[connection.vendor][workload]
    run = measured.run
    assert run.step_count == steps and run.lease_owner == ""
    assert Message.objects.filter(run=run).count() == 1 + steps
    assert measured.phases == expected, (
        f"{workload} on {connection.vendor}: (statements incl. BEGIN/COMMIT, commits) "
        f"changed; execution sent:\n{measured.listing}"
    )


def test_events_built_from_returned_rows_equal_fresh_reads() -> None:
    """The publisher projects the rows the store's writes returned instead of reading them
    back: every event must carry exactly what a read after the run projects."""
    from pai_threads.realtime.buffers import get_buffer
    from pai_threads.websocket.snapshot import (
        message_public,
        run_public,
        side_state_events,
    )

    identity = Identity(scope_key="budget", data={})
    pai = {**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], w1_agent]}
    message = {**USER_MESSAGE, "metadata": {"client": {"x": 1.5, "s": "grüße"}}}
    with override_settings(PAI=pai):
        thread = services.create_thread(identity, agent=w1_agent.name)
        sent = services.send(identity, thread.id, message, dispatch=False)
        assert sent.run is not None and execute(sent.run.id) == "completed"

        async def events() -> list[dict[str, Any]]:
            buffer = get_buffer()
            state = await buffer.state(thread.id)
            return await buffer.read(thread.id, after=0, upto=state.last_seq)

        published = [e for e in asyncio.run(events()) if e["type"] != "generation.message.chunk"]

    rows = {row.message_id: message_public(row) for row in Message.objects.filter(run=sent.run)}
    run = run_public(Run.objects.get(id=sent.run.id))
    kinds = [e["type"] for e in published]
    assert kinds == [
        "message.committed",  # the send's: its message, its run, the (empty) side state
        "run.status",
        "queue.changed",
        "actions.changed",
        "run.status",  # the claim: running
        "generation.started",
        "generation.finished",
        "generation.started",
        "generation.finished",
        "run.status",
        "queue.changed",
        "actions.changed",
    ]
    committed, queued, sent_queue, sent_actions, running, *_ = published
    *_, finished, queue, actions = published
    assert committed["message"] == rows[committed["message"]["id"]]
    assert queued["status"] == "queued" and queued["run"]["id"] == sent.run.id
    assert (sent_queue["queue"], sent_actions["pendingActions"]) == ({"items": []}, [])
    for event in published:
        if event["type"] == "generation.finished":
            assert event["message"] == rows[event["messageId"]]
    assert finished["run"] == run and finished["status"] == "completed"
    assert running["run"] == {
        **run,
        "status": "running",
        "stepCount": 0,
        "usage": {},
        "finishedAt": None,
    }
    unnumbered = [{k: v for k, v in e.items() if k != "seq"} for e in (queue, actions)]
    assert unnumbered == side_state_events(thread.id)


def test_single_statement_writes_are_fenced_by_the_lease() -> None:
    """The writes folded into one statement (a message update fenced by a locking EXISTS,
    a checkpoint of an open row, the step CTE on PostgreSQL, the heartbeat) still write
    nothing once another worker holds the run."""
    from datetime import UTC, datetime

    from pai_agents.engine.store import LeaseLost, StepRecord
    from pai_threads.store.thread_store import ORMThreadStore

    queued = _queued_run()
    store = ORMThreadStore()
    stale = store.claim_run_sync(queued.id, owner="w1", lease_seconds=60).lease
    now = datetime.now(UTC)
    call = {"type": "tool-lookup", "toolCallId": "c1", "state": "input-available", "input": {}}
    step = StepRecord(
        index=0, message_id="a1", request={}, usage={}, finish_reason="tool-calls",
        started_at=now, finished_at=now,
    )  # fmt: skip
    store.commit_step_sync(
        stale, message={"id": "a1", "role": "assistant", "parts": [call]}, step=step, outcome=None
    )
    open_part = {"type": "text", "text": "so far", "state": "streaming"}
    open_message = {"id": "a2", "role": "assistant", "parts": [open_part]}
    store.checkpoint_message_sync(stale, message=open_message, step_index=1)
    # The lease runs out (LC-033: w1 may not write after that), and w2 takes over.
    Run.objects.filter(id=queued.id).update(lease_expires_at=timezone.now() - timedelta(1))
    fresh = store.claim_run_sync(queued.id, owner="w2", lease_seconds=60).lease
    before = {m.message_id: (m.parts, m.updated_at) for m in Message.objects.filter(run=queued)}

    done = {**call, "state": "output-available", "output": 42}
    with pytest.raises(LeaseLost):
        store.update_message_sync(
            stale, message={"id": "a1", "role": "assistant", "parts": [done]}, outcome=None
        )
    with pytest.raises(LeaseLost):
        store.checkpoint_message_sync(stale, message={**open_message, "parts": []}, step_index=1)
    with pytest.raises(LeaseLost):
        store.commit_step_sync(
            stale,
            message={"id": "a3", "role": "assistant", "parts": [{"type": "text", "text": "x"}]},
            step=StepRecord(**{**step.__dict__, "index": 2, "message_id": "a3"}),
            outcome=None,
        )
    with pytest.raises(LeaseLost):
        store.heartbeat_sync(stale, lease_seconds=60)

    after = {m.message_id: (m.parts, m.updated_at) for m in Message.objects.filter(run=queued)}
    assert after == before
    run = Run.objects.get(id=queued.id)
    assert (run.lease_owner, run.lease_token, run.step_count) == ("w2", fresh.token, 1)


def test_every_checkpoint_of_a_step_is_one_fenced_statement() -> None:
    """A step's first checkpoint inserts its open message in one statement, as later ones
    update it in one (no transaction, no ORM fence); a stale lease's first checkpoint inserts
    nothing, and one of a step whose open row a crashed execution left updates that row."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from pai_agents.engine.store import LeaseLost
    from pai_threads.store.thread_store import ORMThreadStore

    queued = _queued_run()
    crashed = ORMThreadStore()
    stale = crashed.claim_run_sync(queued.id, owner="w1", lease_seconds=60).lease

    def parts(text: str) -> dict[str, Any]:
        part = {"type": "text", "text": text, "state": "streaming"}
        return {"id": "a1", "role": "assistant", "parts": [part]}

    for text in ("first", "second"):
        with CaptureQueriesContext(connections["default"]) as captured:
            crashed.checkpoint_message_sync(stale, message=parts(text), step_index=0)
        assert len(captured.captured_queries) == 1, captured.captured_queries
        assert Message.objects.get(message_id="a1").parts[0]["text"] == text

    Run.objects.filter(id=queued.id).update(lease_expires_at=timezone.now() - timedelta(1))
    taken = ORMThreadStore()
    fresh = taken.claim_run_sync(queued.id, owner="w2", lease_seconds=60).lease
    with pytest.raises(LeaseLost):
        ORMThreadStore().checkpoint_message_sync(stale, message=parts("stale"), step_index=1)
    assert not Message.objects.filter(run=queued, step_index=1).exists()
    # The new owner's first checkpoint of step 0 finds the crashed execution's open row.
    taken.checkpoint_message_sync(fresh, message=parts("resumed"), step_index=0)
    rows = Message.objects.filter(run=queued, relation=Message.Relation.OUTPUT)
    assert [(m.message_id, m.status, m.parts[0]["text"]) for m in rows] == [
        ("a1", Message.Status.OPEN, "resumed")
    ]


def test_a_checkpointed_steps_commit_replaces_its_open_row_in_one_or_three_statements() -> None:
    """A streamed answer longer than a checkpoint ends by committing its open row: the
    fencing UPDATE, the row's UPDATE (returning it, no read first) and the Step INSERT; on
    PostgreSQL the three are one statement (store.fenced_writes.replace_statement)."""
    from datetime import UTC, datetime

    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from pai_agents.engine.store import StepRecord
    from pai_threads.models import Step
    from pai_threads.store.thread_store import ORMThreadStore

    queued = _queued_run()
    store = ORMThreadStore()
    lease = store.claim_run_sync(queued.id, owner="w1", lease_seconds=60).lease
    streaming = {"type": "text", "text": "so", "state": "streaming"}
    store.checkpoint_message_sync(
        lease, message={"id": "a1", "role": "assistant", "parts": [streaming]}, step_index=0
    )
    now = datetime.now(UTC)
    step = StepRecord(
        index=0, message_id="a1", request={}, usage={"outputTokens": 2}, finish_reason="stop",
        started_at=now, finished_at=now,
    )  # fmt: skip
    done = {"type": "text", "text": "so far", "state": "done"}
    with CaptureQueriesContext(connections["default"]) as captured:
        store.commit_step_sync(
            lease,
            message={"id": "a1", "role": "assistant", "parts": [done]},
            step=step,
            outcome=None,
            replace_open=True,
        )
    statements = [q["sql"] for q in captured.captured_queries]
    writes = [sql for sql in statements if sql.split()[0] in ("UPDATE", "INSERT", "SELECT")]
    if connection.vendor == "postgresql":
        assert len(statements) == 1 and statements[0].startswith("WITH pai_fence"), statements
    else:
        assert [sql.split()[0] for sql in writes] == ["UPDATE", "UPDATE", "INSERT"], statements
    rows = Message.objects.filter(run=queued, relation=Message.Relation.OUTPUT)
    assert [(m.message_id, m.status, m.parts, m.usage) for m in rows] == [
        ("a1", Message.Status.COMMITTED, [done], {"outputTokens": 2})
    ]
    stored = Step.objects.get(run_id=queued.id, index=0)
    assert (stored.message_id, stored.attempt) == (rows[0].pk, 1)
