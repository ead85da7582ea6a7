"""A heartbeat that races the run's own ending write (issue 16, found at 200 streams).

The ending write releases the lease; a heartbeat sent meanwhile finds no lease and the
store reports it lost (the store contract). The engine raised ``LeaseLost`` for it after
the final commit: the completed run looked abandoned and its ``run_finished`` hooks and
signals never ran. An outcome comes from a fenced ending write, so the engine now returns
it. A lease another worker took is lost before any ending write lands.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from benchmarks.agents import w1_agent
from pai_agents.engine.runner import RunEngine
from pai_agents.engine.store import Lease, LeaseLost, RunOutcome, RunSignals
from pai_threads.models import Run
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)


class LateHeartbeatStore(ORMThreadStore):
    """Its heartbeat is sent only after the run's ending write, which waits for it: the
    race, made certain."""

    def __init__(self) -> None:
        super().__init__()
        self.ended = asyncio.Event()
        self.beaten = asyncio.Event()
        self.beats: list[RunSignals | BaseException] = []

    async def commit_step(self, lease: Lease, **kwargs: Any) -> None:
        await super().commit_step(lease, **kwargs)
        if kwargs.get("outcome") is not None:
            self.ended.set()
            await asyncio.wait_for(self.beaten.wait(), 30)

    async def heartbeat(self, lease: Lease, *, lease_seconds: float) -> RunSignals:
        await self.ended.wait()
        try:
            signals = await super().heartbeat(lease, lease_seconds=lease_seconds)
        except BaseException as exc:
            self.beats.append(exc)
            raise
        finally:
            self.beaten.set()
        self.beats.append(signals)
        return signals


def test_a_heartbeat_after_the_final_commit_does_not_abandon_the_completed_run(
    queued_w1_run: str,
) -> None:
    store = LateHeartbeatStore()

    async def execute() -> RunOutcome:
        claim = await store.claim_run(queued_w1_run, owner="w", lease_seconds=3)
        engine = RunEngine(agent=w1_agent, store=store, lease_seconds=3)
        return await engine.run_episode(claim)

    outcome = asyncio.run(execute())
    assert outcome.status == "completed"
    assert len(store.beats) == 1 and isinstance(store.beats[0], LeaseLost)  # the contract
    assert Run.objects.get(pk=queued_w1_run).status == "completed"


def test_a_lease_another_worker_took_is_still_reported_lost(queued_w1_run: str) -> None:
    ours = ORMThreadStore()
    claim = asyncio.run(ours.claim_run(queued_w1_run, owner="a", lease_seconds=60))
    expired = timezone.now() - timedelta(seconds=1)
    Run.objects.filter(pk=queued_w1_run).update(lease_expires_at=expired)
    asyncio.run(ORMThreadStore().claim_run(queued_w1_run, owner="b", lease_seconds=60))

    async def after_the_takeover() -> None:
        with pytest.raises(LeaseLost):
            await ours.heartbeat(claim.lease, lease_seconds=60)
        # Its ending write fails too, and a heartbeat after it still reports the loss.
        with pytest.raises(LeaseLost):
            await ours.finish_run(claim.lease, RunOutcome(status="completed"))
        with pytest.raises(LeaseLost):
            await ours.heartbeat(claim.lease, lease_seconds=60)

    asyncio.run(after_the_takeover())
    assert Run.objects.get(pk=queued_w1_run).lease_owner == "b"
