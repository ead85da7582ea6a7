"""What clients are told: the event vocabulary, the row projections, and publishing.

* :mod:`.types`: every event type (``TypedDict`` + constructor), the engine's included;
* :mod:`.projections`: the one client projection of each stored row;
* :mod:`.publishing`: operations publish their events after commit, through here only.
"""

from pai_threads.events.publishing import publish_after_commit, publish_now
from pai_threads.events.types import (
    ActionsChanged,
    EngineEvent,
    GenerationFinished,
    GenerationMessageChunk,
    GenerationStarted,
    MessageCommitted,
    QueueChanged,
    RunEvent,
    RunStatus,
    ThreadDeleted,
    ThreadEvent,
    ThreadUpdated,
    actions_changed,
    empty_side_state,
    generation_finished,
    generation_message_chunk,
    generation_started,
    message_committed,
    queue_changed,
    run_and_side_state,
    run_status,
    run_status_of,
    side_state,
    stored_message_committed,
    thread_deleted,
    thread_updated,
)

__all__ = [
    "ActionsChanged",
    "EngineEvent",
    "GenerationFinished",
    "GenerationMessageChunk",
    "GenerationStarted",
    "MessageCommitted",
    "QueueChanged",
    "RunEvent",
    "RunStatus",
    "ThreadDeleted",
    "ThreadEvent",
    "ThreadUpdated",
    "actions_changed",
    "empty_side_state",
    "generation_finished",
    "generation_message_chunk",
    "generation_started",
    "message_committed",
    "publish_after_commit",
    "publish_now",
    "queue_changed",
    "run_and_side_state",
    "run_status",
    "run_status_of",
    "side_state",
    "stored_message_committed",
    "thread_deleted",
    "thread_updated",
]
