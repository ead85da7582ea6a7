from __future__ import annotations

from typing import Protocol

__all__ = ["Executor"]


class Executor(Protocol):
    def dispatch(self, run_id: str) -> None:
        """Hand a committed run to a worker. Called after the transaction commits."""
        ...

    # Optional: ``dispatch_title(thread_id, run_id)`` runs a thread title job after a completed
    # run (pai_threads.titles); an executor without it gets the in-process background loop.
