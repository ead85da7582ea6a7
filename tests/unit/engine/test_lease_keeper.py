"""Heartbeats: a lost lease or a cancel stops the execution; so does a lease that runs out
while every renewal fails (a database outage), before another worker may take it over."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pai_agents.abort import AbortSignal
from pai_agents.engine.lease_keeper import LeaseKeeper
from pai_agents.engine.store import Lease

LEASE = Lease(run_id="run_1", owner="w1", token=1, thread_id="thr_1", scope_key="s")


class FailingStore:
    """A store whose heartbeat fails the way an unreachable database does."""

    def __init__(self, fail_after: int = 0) -> None:
        self.calls = 0
        self.fail_after = fail_after

    async def heartbeat(self, lease: Lease, *, lease_seconds: float) -> Any:
        self.calls += 1
        if self.calls > self.fail_after:
            raise ConnectionError("server closed the connection unexpectedly")
        return type("Signals", (), {"cancel_requested": False})()


async def _run_until_aborted(
    store: FailingStore, lease_seconds: float
) -> tuple[LeaseKeeper, float]:
    signal = AbortSignal()
    keeper = LeaseKeeper(store, LEASE, lease_seconds=lease_seconds, signal=signal)  # type: ignore[arg-type]
    t0 = time.monotonic()
    async with keeper:
        while not signal.aborted and time.monotonic() - t0 < 5 * lease_seconds:
            await asyncio.sleep(0.01)
    return keeper, time.monotonic() - t0


async def test_failing_renewals_stop_the_execution_before_the_lease_can_expire() -> None:
    keeper, elapsed = await _run_until_aborted(FailingStore(), lease_seconds=1.5)
    assert keeper.lost
    # Stopped one interval (0.5 s) before the lease taken at the start could run out.
    assert elapsed < 1.5


async def test_a_renewal_that_succeeded_extends_the_time_before_giving_up() -> None:
    store = FailingStore(fail_after=3)
    keeper, elapsed = await _run_until_aborted(store, lease_seconds=1.5)
    assert keeper.lost and store.calls >= 4
    # Three successful beats (0.5 s apart) moved the deadline past the first lease.
    assert elapsed > 1.5


async def test_a_single_failed_renewal_is_retried_without_stopping() -> None:
    class OneFailure(FailingStore):
        async def heartbeat(self, lease: Lease, *, lease_seconds: float) -> Any:
            self.calls += 1
            if self.calls == 1:
                raise ConnectionError("blip")
            return type("Signals", (), {"cancel_requested": False})()

    signal = AbortSignal()
    store = OneFailure()
    keeper = LeaseKeeper(store, LEASE, lease_seconds=0.6, signal=signal)  # type: ignore[arg-type]
    async with keeper:
        await asyncio.sleep(1.5)
    assert not keeper.lost and not signal.aborted and store.calls >= 4
