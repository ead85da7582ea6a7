"""A run's one step, and committing it through the ORM store as the engine's final write does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pai_agents.engine.store import Lease, RunOutcome, StepRecord
from pai_threads.store.thread_store import ORMThreadStore

__all__ = ["commit_only_step", "only_step"]


def only_step(message_id: str) -> StepRecord:
    """A run's first step, answered by ``message_id``, stopped just now."""
    now = datetime.now(UTC)
    return StepRecord(
        index=0,
        message_id=message_id,
        request={},
        usage={},
        finish_reason="stop",
        started_at=now,
        finished_at=now,
    )


def commit_only_step(store: ORMThreadStore, lease: Lease, message: dict[str, Any]) -> None:
    """Commit ``message`` as step 0 of the leased run, ending it ``completed``."""
    store.commit_step_sync(
        lease,
        message=message,  # type: ignore[arg-type]
        step=only_step(message["id"]),
        outcome=RunOutcome(status="completed"),
    )
