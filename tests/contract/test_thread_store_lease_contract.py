"""The ThreadStore contract, part two: takeovers and lease loss, on every backend.

A worker's lease ends when it runs out and another worker claims the run (a higher fencing
token). From then on every write of the old execution must raise ``LeaseLost`` and change
nothing, while the new holder resumes from what the old one committed. Same backends as
``test_thread_store_contract``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from pai_agents.engine.store import ClaimedRun, Lease, LeaseLost, RunOutcome, ThreadStore
from tests.contract.thread_store_backends import MemoryBackend, ORMBackend, StoreBackend
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


async def test_a_takeover_resumes_from_what_the_dead_worker_left(backend: StoreBackend) -> None:
    """The new claim sees the last step message and that it was left open; the open row is
    not context, and committing it under the same id leaves one message for the step."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    await store.commit_step(lease, message=tool_message("a-0"), step=step(0, "a-0", "tool-calls"))
    await store.checkpoint_message(lease, message=text_message("a-1", "half"), step_index=1)
    await backend.expire_lease(lease.run_id)

    new_store = backend.worker()
    second = await new_store.claim_run(lease.run_id, owner="worker-b", lease_seconds=LEASE)
    assert second.step_count == 1 and second.last_message_open
    assert second.last_message == text_message("a-1", "half")
    assert [m["id"] for m in await new_store.load_context(second.lease)] == ["user-1", "a-0"]
    await new_store.commit_step(
        second.lease,
        message=text_message("a-1", "whole"),
        step=step(1, "a-1"),
        outcome=COMPLETED,
        replace_open=True,
    )
    assert await ids(backend, thread_id) == [
        ("user-1", "committed"),
        ("a-0", "committed"),
        ("a-1", "committed"),
    ]
    assert await backend.steps(lease.run_id) == [0, 1]


Write = Callable[[ThreadStore, Lease], Awaitable[Any]]

# Every write of the protocol, as the old lease holder would make it in the scene of
# ``lost_lease``: step 0 committed (a tool call), step 1 checkpointed (open), steering queued.
OLD_WRITES: dict[str, Write] = {
    "heartbeat": lambda s, lease: s.heartbeat(lease, lease_seconds=LEASE),
    "checkpoint_message": lambda s, lease: s.checkpoint_message(
        lease, message=text_message("a-1", "more"), step_index=1
    ),
    "commit_step": lambda s, lease: s.commit_step(
        lease, message=text_message("a-9", "late"), step=step(9, "a-9")
    ),
    "commit_step_replace_open": lambda s, lease: s.commit_step(
        lease, message=text_message("a-1", "late"), step=step(1, "a-1"), replace_open=True
    ),
    "commit_step_outcome": lambda s, lease: s.commit_step(
        lease,
        message=text_message("a-1", "late"),
        step=step(1, "a-1"),
        outcome=COMPLETED,
        replace_open=True,
    ),
    "update_message": lambda s, lease: s.update_message(lease, message=with_result(CALL, 1)),
    "update_message_outcome": lambda s, lease: s.update_message(
        lease, message=with_result(CALL, 1), outcome=COMPLETED
    ),
    "suspend": lambda s, lease: s.suspend(lease, message=CALL, actions=[APPROVAL], usage=USAGE),
    "begin_actions": lambda s, lease: s.begin_actions(lease, tool_call_ids=["call-1"]),
    "take_steering": lambda s, lease: s.take_steering(lease),
    "finish_run": lambda s, lease: s.finish_run(lease, COMPLETED),
    "finish_run_discard_open_step": lambda s, lease: s.finish_run(
        lease, RunOutcome(status="failed"), discard_open_step=1
    ),
}


async def lost_lease(backend: StoreBackend) -> tuple[str, ThreadStore, Lease, ClaimedRun]:
    """Worker A ran a step, checkpointed the next and saw steering queued; then its lease
    ran out and worker B took the run over. Returns (thread, A's store, A's lease, B's claim)."""
    thread_id, claim = await claimed(backend)
    store, lease = backend.worker(), claim.lease
    await store.commit_step(lease, message=CALL, step=step(0, "a-0", "tool-calls"))
    await store.checkpoint_message(lease, message=text_message("a-1", "half"), step_index=1)
    await backend.steer(thread_id, "steer-1", "also")
    await store.heartbeat(lease, lease_seconds=LEASE)  # A's last write: it saw the queue
    await backend.expire_lease(lease.run_id)
    taken = await backend.worker().claim_run(lease.run_id, owner="worker-b", lease_seconds=LEASE)
    assert taken.lease.token > lease.token
    return thread_id, store, lease, taken


@pytest.mark.parametrize("write", sorted(OLD_WRITES))
async def test_after_a_takeover_every_write_of_the_old_lease_is_lost(
    backend: StoreBackend, write: str
) -> None:
    """LC-032, LC-033: once another worker took the run over, each write of the old lease
    raises LeaseLost and changes nothing, whatever it would have written."""
    thread_id, store, lease, taken = await lost_lease(backend)
    before = await backend.snapshot(thread_id, lease.run_id)
    with pytest.raises(LeaseLost):
        await OLD_WRITES[write](store, lease)
    assert await backend.snapshot(thread_id, lease.run_id) == before
    # The new holder is unaffected: its writes go through.
    await backend.worker().heartbeat(taken.lease, lease_seconds=LEASE)


async def test_the_new_lease_holder_carries_on_after_a_takeover(backend: StoreBackend) -> None:
    _, _, lease, taken = await lost_lease(backend)
    store = backend.worker()
    assert [m["id"] for m in await store.take_steering(taken.lease)] == ["steer-1"]
    await store.commit_step(
        taken.lease,
        message=text_message("a-1", "answer"),
        step=step(1, "a-1"),
        outcome=COMPLETED,
        replace_open=True,
    )
    run = await backend.run(lease.run_id)
    assert (run.status, run.step_count, run.token) == ("completed", 2, taken.lease.token)


async def test_lc_033_a_write_after_lease_expiry_is_rejected_even_before_a_takeover(
    backend: StoreBackend,
) -> None:
    """LC-033: writes are conditional on the current owner by the store's clock; LeaseLost
    means "expired or taken over" (both stores used to commit an expired lease's write)."""
    thread_id, claim = await claimed(backend)
    await backend.expire_lease(claim.lease.run_id)
    before = await backend.snapshot(thread_id, claim.lease.run_id)
    with pytest.raises(LeaseLost):
        await backend.worker().commit_step(
            claim.lease, message=text_message("a-0", "late"), step=step(0, "a-0")
        )
    assert await backend.snapshot(thread_id, claim.lease.run_id) == before
