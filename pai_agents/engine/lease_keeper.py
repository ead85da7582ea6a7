"""Heartbeats for one execution: keep the lease while the model streams and tools run.

A heartbeat that finds the lease gone, or the run cancelled, fires the execution's abort
signal; the engine then stops (writing nothing more after a lost lease). So does a run whose
heartbeats keep failing (a database outage) once its last renewal is about to run out: the
lease may be taken over at expiry, and an execution that went on streaming would send its
chunks to clients after the new owner's (its writes are fenced either way).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from types import TracebackType

from pai_agents.abort import AbortSignal
from pai_agents.engine.store import Lease, LeaseLost, ThreadStore

__all__ = ["LeaseKeeper"]

logger = logging.getLogger("pai.engine")


class LeaseKeeper:
    def __init__(
        self, store: ThreadStore, lease: Lease, *, lease_seconds: float, signal: AbortSignal
    ) -> None:
        self._store = store
        self._lease = lease
        self._lease_seconds = lease_seconds
        self._signal = signal
        self._task: asyncio.Task[None] | None = None
        self.lost = False
        self.cancel_requested = False
        # When the newest renewal was sent (monotonic): the lease lasts lease_seconds from
        # the moment the store applied it, which is no earlier than this.
        self._renewed_at = time.monotonic()

    async def __aenter__(self) -> LeaseKeeper:
        self._renewed_at = time.monotonic()
        self._task = asyncio.create_task(self._beat(), name=f"pai-heartbeat-{self._lease.run_id}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _beat(self) -> None:
        interval = max(self._lease_seconds / 3, 0.05)
        while not self._signal.aborted:
            await asyncio.sleep(interval)
            started = time.monotonic()
            try:
                signals = await self._store.heartbeat(
                    self._lease, lease_seconds=self._lease_seconds
                )
            except LeaseLost:
                logger.warning("run %s lost its lease", self._lease.run_id)
                self.lost = True
                self._signal.abort("lease lost")
                return
            except Exception:
                # A transient database error must not kill the run: the next beat retries
                # while the lease (three intervals) lasts. Give up one interval before it
                # can run out, so the execution stops before another worker may take over.
                logger.warning("heartbeat of run %s failed", self._lease.run_id, exc_info=True)
                if time.monotonic() - self._renewed_at >= self._lease_seconds - interval:
                    logger.warning(
                        "run %s stops: its lease runs out without a renewal", self._lease.run_id
                    )
                    self.lost = True
                    self._signal.abort("lease expired")
                    return
                continue
            self._renewed_at = started
            if signals.cancel_requested:
                self.cancel_requested = True
                self._signal.abort("cancelled")
                return
