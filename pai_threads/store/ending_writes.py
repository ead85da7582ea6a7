"""The runs whose ending write an execution has sent, for its heartbeats.

A write that ends a run (or makes it wait) releases the run's lease. A heartbeat that races
it then finds no lease, and reporting that as a loss made a completed run look abandoned:
the engine raised ``LeaseLost`` after the run's final commit, so its ``run_finished``
hooks and signals never ran (seen at 200 concurrent streams under load, issue 16). Had
another worker taken the lease, the ending write itself raises ``LeaseLost``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

__all__ = ["EndingWrites"]


class EndingWrites:
    """Run ids whose ending write was sent; one that failed has ended nothing."""

    def __init__(self) -> None:
        self._runs: set[str] = set()

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    @contextlib.asynccontextmanager
    async def around(self, run_id: str, *, ends: bool = True) -> AsyncIterator[None]:
        """Around a write that ends the run when ``ends``."""
        if not ends:
            yield
            return
        self._runs.add(run_id)
        try:
            yield
        except BaseException:
            self._runs.discard(run_id)
            raise
