"""The ThreadStore contract: one set of cases, run against every implementation.

``backend`` is the in-memory store (``pai_agents.engine.memory``) and the ORM store
(``pai_threads.store``) on the run's database: the suite runs once on SQLite and once with
``DATABASE_URL`` pointing at PostgreSQL, so each case holds on three backends (DESIGN.md:
"a store-conformance test suite"). A case uses only the protocol; setting the scene and
reading back what was written goes through ``thread_store_backends``. Takeovers and lease
loss are in ``test_thread_store_lease_contract``.

Where the two implementations disagree, the case states what the specification and the
engine expect, and marks the implementation that does not do it as a strict xfail.
"""

from __future__ import annotations

import asyncio

import pytest
from django.db import IntegrityError

from pai_agents.engine.store import (
    ClaimedRun,
    LeaseLost,
    OpenMessageConflict,
    RunNotFound,
    RunOutcome,
)
from pai_agents.messages.parts import UnknownPartType
from pai_agents.messages.types import UIMessage
from tests.contract.thread_store_backends import AGENT, MemoryBackend, ORMBackend, StoreBackend
from tests.contract.thread_store_values import (
    APPROVAL,
    CALL,
    COMPLETED,
    LEASE,
    ORM_DB,
    USAGE,
    claimed,
    ids,
    step,
    text_message,
    tool_message,
    with_result,
)


@pytest.fixture(params=["memory", pytest.param("orm", marks=ORM_DB)])
def backend(request: pytest.FixtureRequest) -> StoreBackend:
    return ORMBackend() if request.param == "orm" else MemoryBackend()


# --------------------------------------------------------------------------- claim


async def test_concurrent_claims_one_claimant_wins(backend: StoreBackend) -> None:
    """Two workers claim the same queued run at once: exactly one gets the lease."""
    _, run_id = await backend.start_run()
    results = await asyncio.gather(
        *(
            backend.worker().claim_run(run_id, owner=owner, lease_seconds=LEASE)
            for owner in ("worker-a", "worker-b")
        ),
        return_exceptions=True,
    )
    won = [r for r in results if isinstance(r, ClaimedRun)]
    lost = [r for r in results if isinstance(r, RunNotFound)]
    assert len(won) == 1 and len(lost) == 1, results
    run = await backend.run(run_id)
    assert run.status == "running" and run.owner == won[0].lease.owner
    assert run.token == won[0].lease.token and run.attempt == 1


async def test_a_claim_hands_the_worker_what_it_needs_to_execute(backend: StoreBackend) -> None:
    thread_id, claim = await claimed(backend)
    lease = claim.lease
    assert (lease.thread_id, lease.run_id, lease.owner) == (thread_id, lease.run_id, "worker-a")
    assert claim.thread_id == thread_id and claim.scope_key == lease.scope_key == "user:alice"
    assert claim.agent_name == AGENT and claim.initiator == "send"
    assert (claim.step_count, claim.attempt) == (0, 1)
    assert claim.last_message is None and not claim.last_message_open
    assert claim.executing_tool_calls == frozenset() and claim.started_at is not None


async def test_a_live_lease_or_a_finished_run_cannot_be_claimed(backend: StoreBackend) -> None:
    _, claim = await claimed(backend)
    other = backend.worker()
    with pytest.raises(RunNotFound):
        await other.claim_run(claim.lease.run_id, owner="worker-b", lease_seconds=LEASE)
    await backend.worker().finish_run(claim.lease, COMPLETED)
    await backend.expire_lease(claim.lease.run_id)
    with pytest.raises(RunNotFound):
        await other.claim_run(claim.lease.run_id, owner="worker-b", lease_seconds=LEASE)
    with pytest.raises(RunNotFound):
        await other.claim_run("run_missing", owner="worker-b", lease_seconds=LEASE)


async def test_a_takeover_raises_the_fencing_token_and_keeps_the_run_start(
    backend: StoreBackend,
) -> None:
    """LC-007: every claim of a run after the first keeps its ``started_at``."""
    _, first = await claimed(backend)
    await backend.expire_lease(first.lease.run_id)
    second = await backend.worker().claim_run(
        first.lease.run_id, owner="worker-b", lease_seconds=LEASE
    )
    assert second.lease.token > first.lease.token
    assert second.attempt == 2 and second.started_at == first.started_at
    run = await backend.run(first.lease.run_id)
    assert run.owner == "worker-b" and run.token == second.lease.token


async def test_a_heartbeat_keeps_the_lease_and_reports_a_cancel_request(
    backend: StoreBackend,
) -> None:
    _, claim = await claimed(backend)
    store = backend.worker()
    assert not (await store.heartbeat(claim.lease, lease_seconds=LEASE)).cancel_requested
    await backend.request_cancel(claim.lease.run_id)
    assert (await store.heartbeat(claim.lease, lease_seconds=LEASE)).cancel_requested
    # A lease that ran out while nobody took over is renewed by the heartbeat: no claim now.
    await backend.expire_lease(claim.lease.run_id)
    await store.heartbeat(claim.lease, lease_seconds=LEASE)
    with pytest.raises(RunNotFound):
        await backend.worker().claim_run(claim.lease.run_id, owner="b", lease_seconds=LEASE)


# --------------------------------------------------------------------------- steps


async def test_load_context_is_the_committed_thread_oldest_first(backend: StoreBackend) -> None:
    """What the next model step sees: committed context messages in thread order; an open
    checkpoint is not context until its step commits."""
    _, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    assert [m["id"] for m in await store.load_context(lease)] == ["user-1"]

    await store.commit_step(lease, message=text_message("a-0", "first"), step=step(0, "a-0"))
    await store.checkpoint_message(lease, message=text_message("a-1", "par"), step_index=1)
    context = await store.load_context(lease)
    assert [(m["id"], m["role"]) for m in context] == [("user-1", "user"), ("a-0", "assistant")]
    assert context[1]["parts"] == [{"type": "text", "text": "first"}]

    await store.commit_step(
        lease,
        message=text_message("a-1", "partial, then whole"),
        step=step(1, "a-1"),
        replace_open=True,
    )
    assert [m["id"] for m in await store.load_context(lease)] == ["user-1", "a-0", "a-1"]


async def test_commit_step_stores_the_message_and_step_and_counts_it(
    backend: StoreBackend,
) -> None:
    """MF-001, MF-002: one assistant message per step, carrying that step's own usage."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    await store.commit_step(lease, message=tool_message("a-0"), step=step(0, "a-0", "tool-calls"))
    run = await backend.run(lease.run_id)
    assert run.status == "running" and run.step_count == 1 and run.owner == "worker-a"
    messages = await backend.messages(thread_id)
    assert [(m.id, m.role, m.status, m.step_index) for m in messages] == [
        ("user-1", "user", "committed", None),
        ("a-0", "assistant", "committed", 0),
    ]
    assert messages[1].run_id == lease.run_id and messages[1].usage == dict(USAGE)
    assert await backend.steps(lease.run_id) == [0]


async def test_commit_step_with_an_outcome_ends_the_run_in_the_same_write(
    backend: StoreBackend,
) -> None:
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    await store.commit_step(
        lease, message=text_message("a-0", "done"), step=step(0, "a-0"), outcome=COMPLETED
    )
    run = await backend.run(lease.run_id)
    assert (run.status, run.step_count, run.owner, run.usage) == ("completed", 1, "", USAGE)
    assert await ids(backend, thread_id) == [("user-1", "committed"), ("a-0", "committed")]
    with pytest.raises(LeaseLost):  # the run is over: the lease went with it
        await store.heartbeat(lease, lease_seconds=LEASE)


async def test_a_checkpoint_is_one_open_row_the_step_commit_replaces(
    backend: StoreBackend,
) -> None:
    """MF-043: the streaming step is one open message at the thread's tail, updated in
    place by later checkpoints and committed (not duplicated) by ``replace_open``."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    await store.checkpoint_message(lease, message=text_message("a-0", "He"), step_index=0)
    await store.checkpoint_message(lease, message=text_message("a-0", "Hello"), step_index=0)
    messages = await backend.messages(thread_id)
    assert [(m.id, m.status, m.step_index) for m in messages[1:]] == [("a-0", "open", 0)]
    assert messages[1].parts == [{"type": "text", "text": "Hello"}]

    await store.commit_step(
        lease, message=text_message("a-0", "Hello there"), step=step(0, "a-0"), replace_open=True
    )
    messages = await backend.messages(thread_id)
    assert [(m.id, m.status) for m in messages] == [("user-1", "committed"), ("a-0", "committed")]
    assert messages[1].parts == [{"type": "text", "text": "Hello there"}]
    assert await backend.steps(lease.run_id) == [0]


async def test_only_one_assistant_message_may_be_open(backend: StoreBackend) -> None:
    """MF-043: a second open message, or an open user message, is refused and not stored."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    await store.checkpoint_message(lease, message=text_message("a-0", "x"), step_index=0)
    with pytest.raises(OpenMessageConflict):
        await store.checkpoint_message(lease, message=text_message("a-1", "y"), step_index=1)
    user = UIMessage(id="u-open", role="user", parts=[{"type": "text", "text": "z"}])
    with pytest.raises(OpenMessageConflict):
        await store.checkpoint_message(lease, message=user, step_index=2)
    assert await ids(backend, thread_id) == [("user-1", "committed"), ("a-0", "open")]


async def test_a_checkpoint_streams_only_into_the_open_tail(backend: StoreBackend) -> None:
    """MF-043: once the step is committed, or steered input follows its open message, a
    checkpoint of it is refused and nothing changes."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    await store.commit_step(lease, message=text_message("a-0", "done"), step=step(0, "a-0"))
    with pytest.raises(OpenMessageConflict):
        await store.checkpoint_message(lease, message=text_message("a-0", "again"), step_index=0)
    await store.checkpoint_message(lease, message=text_message("a-1", "x"), step_index=1)
    await backend.steer(thread_id, "steer-1", "wait")
    await store.heartbeat(lease, lease_seconds=LEASE)
    assert [m["id"] for m in await store.take_steering(lease)] == ["steer-1"]
    before = await backend.snapshot(thread_id, lease.run_id)
    with pytest.raises(OpenMessageConflict):
        await store.checkpoint_message(lease, message=text_message("a-1", "xy"), step_index=1)
    assert await backend.snapshot(thread_id, lease.run_id) == before


async def test_a_step_with_an_unknown_part_type_is_refused_whole(backend: StoreBackend) -> None:
    """MF-045: an unknown part type fails the write and nothing of the step is stored."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    bad = UIMessage(id="a-0", role="assistant", parts=[{"type": "made-up", "text": "?"}])
    with pytest.raises(UnknownPartType):
        await store.commit_step(lease, message=bad, step=step(0, "a-0"), outcome=COMPLETED)
    with pytest.raises(UnknownPartType):
        await store.checkpoint_message(lease, message=bad, step_index=0)
    assert await ids(backend, thread_id) == [("user-1", "committed")]
    assert await backend.steps(lease.run_id) == []
    assert (await backend.run(lease.run_id)).status == "running"


async def test_update_message_replaces_a_committed_step_messages_parts(
    backend: StoreBackend,
) -> None:
    """The tool result lands in the step's message: visible to the next step's context."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    call = tool_message("a-0")
    await store.commit_step(lease, message=call, step=step(0, "a-0", "tool-calls"))
    await store.update_message(lease, message=with_result(call, {"result": 42}))
    context = await store.load_context(lease)
    assert context[-1]["parts"][0]["output"] == {"result": 42}
    assert (await backend.run(lease.run_id)).status == "running"

    await store.update_message(lease, message=with_result(call, {"result": 43}), outcome=COMPLETED)
    run = await backend.run(lease.run_id)
    assert (run.status, run.owner) == ("completed", "")
    assert (await backend.messages(thread_id))[-1].parts[0]["output"] == {"result": 43}


async def test_update_message_of_a_message_the_run_does_not_have_changes_nothing(
    backend: StoreBackend,
) -> None:
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    before = await backend.snapshot(thread_id, lease.run_id)
    with pytest.raises(LookupError):
        await store.update_message(lease, message=text_message("nope", "x"))
    with pytest.raises(LookupError):
        await store.update_message(lease, message=text_message("nope", "x"), outcome=COMPLETED)
    assert await backend.snapshot(thread_id, lease.run_id) == before


async def test_suspend_waits_releases_the_lease_and_a_resume_claims_again(
    backend: StoreBackend,
) -> None:
    """Approval round trip: suspend stores the message and its pending action, the answer
    queues the run, the resume's claim (a new token) marks the call executing before it
    runs, and a crash after that tells the next claim the call had started."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    call = tool_message("a-0", state="approval-requested", approval={"id": "apr-1"})
    await store.commit_step(lease, message=tool_message("a-0"), step=step(0, "a-0", "tool-calls"))
    await store.suspend(lease, message=call, actions=[APPROVAL], usage=USAGE)
    run = await backend.run(lease.run_id)
    assert (run.status, run.owner, run.usage) == ("waiting", "", USAGE)
    assert await backend.actions(lease.run_id) == {"call-1": "pending"}
    assert (await backend.messages(thread_id))[-1].parts[0]["state"] == "approval-requested"
    with pytest.raises(LeaseLost):
        await store.heartbeat(lease, lease_seconds=LEASE)
    with pytest.raises(RunNotFound):  # waiting for a person: nothing to claim
        await store.claim_run(lease.run_id, owner="worker-b", lease_seconds=LEASE)

    await backend.approve(lease.run_id, "call-1")
    resume = await backend.worker().claim_run(lease.run_id, owner="worker-b", lease_seconds=LEASE)
    assert resume.lease.token > lease.token and resume.attempt == 2 and resume.step_count == 1
    assert resume.last_message is not None and resume.last_message["id"] == "a-0"
    assert not resume.last_message_open and resume.executing_tool_calls == frozenset()
    await backend.worker().begin_actions(resume.lease, tool_call_ids=["call-1"])
    assert await backend.actions(lease.run_id) == {"call-1": "executing"}

    await backend.expire_lease(lease.run_id)  # the resuming worker died inside the tool
    again = await backend.worker().claim_run(lease.run_id, owner="worker-c", lease_seconds=LEASE)
    assert again.executing_tool_calls == frozenset({"call-1"})


async def test_suspend_on_a_message_the_run_does_not_have_changes_nothing(
    backend: StoreBackend,
) -> None:
    """Pending actions belong to a stored step message (an answer is applied to it): a
    suspend naming another message is refused whole, and the run keeps its lease."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    before = await backend.snapshot(thread_id, lease.run_id)
    with pytest.raises(LookupError):
        await store.suspend(lease, message=CALL, actions=[APPROVAL], usage=USAGE)
    assert await backend.snapshot(thread_id, lease.run_id) == before
    await store.heartbeat(lease, lease_seconds=LEASE)


async def test_a_step_is_committed_once(backend: StoreBackend) -> None:
    """MF-001: one assistant message per step; a second commit of the index is refused and
    changes nothing (the type of the refusal is the implementation's)."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    await store.commit_step(lease, message=text_message("a-0", "one"), step=step(0, "a-0"))
    before = await backend.snapshot(thread_id, lease.run_id)
    with pytest.raises((ValueError, IntegrityError)):
        await store.commit_step(
            lease, message=text_message("a-0b", "two"), step=step(0, "a-0b"), outcome=COMPLETED
        )
    assert await backend.snapshot(thread_id, lease.run_id) == before


async def test_take_steering_admits_queued_input_into_the_run_in_order(
    backend: StoreBackend,
) -> None:
    """Steered input becomes user messages of this run, after what the run already wrote
    and before the next step, and is taken once."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    await store.commit_step(lease, message=tool_message("a-0"), step=step(0, "a-0", "tool-calls"))
    await backend.steer(thread_id, "steer-1", "also this")
    await backend.steer(thread_id, "steer-2", "and that")
    await store.heartbeat(lease, lease_seconds=LEASE)  # the engine's writes see the queue
    taken = await store.take_steering(lease)
    assert [(m["id"], m["role"]) for m in taken] == [("steer-1", "user"), ("steer-2", "user")]
    assert taken[0]["parts"] == [{"type": "text", "text": "also this"}]
    assert await store.take_steering(lease) == []
    assert await backend.queued_steering(thread_id) == []
    context = [m["id"] for m in await store.load_context(lease)]
    assert context == ["user-1", "a-0", "steer-1", "steer-2"]
    messages = await backend.messages(thread_id)
    assert {m.run_id for m in messages} == {lease.run_id}

    await store.commit_step(lease, message=text_message("a-1", "ok"), step=step(1, "a-1"))
    assert [m["id"] for m in await store.load_context(lease)][-2:] == ["steer-2", "a-1"]


async def test_finish_run_ends_the_run_and_can_drop_the_open_step(backend: StoreBackend) -> None:
    """LC-116: a policy abort drops the partial step's open checkpoint in the same write."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    await store.commit_step(lease, message=text_message("a-0", "kept"), step=step(0, "a-0"))
    await store.checkpoint_message(lease, message=text_message("a-1", "partial"), step_index=1)
    failed = RunOutcome(status="failed", error={"code": "policy"}, usage=USAGE)
    await store.finish_run(lease, failed, discard_open_step=1)
    run = await backend.run(lease.run_id)
    assert (run.status, run.owner, run.error, run.step_count) == (
        "failed",
        "",
        {"code": "policy"},
        1,
    )
    assert await ids(backend, thread_id) == [("user-1", "committed"), ("a-0", "committed")]
    with pytest.raises(LeaseLost):
        await store.finish_run(lease, COMPLETED)


async def test_finish_run_without_discard_keeps_the_checkpoint(backend: StoreBackend) -> None:
    """Without ``discard_open_step`` the run's messages stay as they stood."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    await store.checkpoint_message(lease, message=text_message("a-0", "partial"), step_index=0)
    await store.finish_run(lease, RunOutcome(status="cancelled"))
    assert (await backend.run(lease.run_id)).status == "cancelled"
    messages = await backend.messages(thread_id)
    assert [(m.id, m.parts) for m in messages][1:] == [
        ("a-0", text_message("a-0", "partial")["parts"])
    ]
