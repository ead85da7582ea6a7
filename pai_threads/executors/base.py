from __future__ import annotations

from typing import Protocol

__all__ = ["Executor"]


class Executor(Protocol):
    def dispatch(self, run_id: str) -> None:
        """Hand a committed run to a worker. Called after the transaction commits."""
        ...
