from __future__ import annotations

from typing import Protocol

__all__ = ["Executor"]


class Executor(Protocol):
    def dispatch(self, run_id: str) -> None:
        """Hand a committed run to a worker. Called after the transaction commits, so it must
        not fail the caller when its transport is away (keep the run for later instead; the
        sweeper re-dispatches runs left ``queued``)."""
        ...

    # Optional: ``dispatch_title(thread_id, run_id)`` runs a thread title job after a completed
    # run (pai_threads.execution.titles); an executor without it gets the in-process loop.
    # Optional: ``pending() -> int`` (dispatches waiting for the transport) and
    # ``flush(timeout) -> int`` (wait for them; returns how many are left), which the sweeper
    # reports and ``pai_recover`` waits for (pai_threads.executors.celery has both).
