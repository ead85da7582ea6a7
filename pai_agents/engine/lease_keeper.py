"""Heartbeats for one execution: keep the lease while the model streams and tools run.

A heartbeat that finds the lease gone, or the run cancelled, fires the execution's abort
signal; the engine then stops (writing nothing more after a lost lease).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
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

    async def __aenter__(self) -> LeaseKeeper:
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
                # A transient database error must not kill the run; the next beat retries
                # well before the lease (three intervals) runs out.
                logger.warning("heartbeat of run %s failed", self._lease.run_id, exc_info=True)
                continue
            if signals.cancel_requested:
                self.cancel_requested = True
                self._signal.abort("cancelled")
                return
