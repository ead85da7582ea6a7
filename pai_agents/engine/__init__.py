"""The engine: the run/step loop and the store protocol it writes through."""

from pai_agents.engine.events import EventSink, NullSink, RecordingSink, RunEvent
from pai_agents.engine.memory import InMemoryThreadStore
from pai_agents.engine.runner import RunEngine
from pai_agents.engine.store import (
    ClaimedRun,
    Lease,
    LeaseLost,
    RunNotFound,
    RunOutcome,
    RunStatus,
    StepRecord,
    ThreadStore,
)

__all__ = [
    "ClaimedRun",
    "EventSink",
    "InMemoryThreadStore",
    "Lease",
    "LeaseLost",
    "NullSink",
    "RecordingSink",
    "RunEngine",
    "RunEvent",
    "RunNotFound",
    "RunOutcome",
    "RunStatus",
    "StepRecord",
    "ThreadStore",
]
