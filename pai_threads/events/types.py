"""The event vocabulary of a thread: every event clients receive, typed, with constructors.

Each event is a ``TypedDict`` whose ``type`` is a ``Literal``. The engine's events
(``generation.*``, ``run.status``, ``message.committed``) are defined in
:mod:`pai_agents.engine.events` (the engine never imports Django) and re-exported here;
this module adds what the thread's operations announce: the queue, the pending actions
and the thread head. Build every event with these constructors; publish them with
:mod:`pai_threads.events.publishing`. The wire protocol is docs/realtime.md.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, TypedDict

from pai_agents.engine.events import (
    EngineEvent,
    GenerationFinished,
    GenerationMessageChunk,
    GenerationStarted,
    MessageCommitted,
    RunEvent,
    RunStatus,
    generation_finished,
    generation_message_chunk,
    generation_started,
    message_committed,
    run_status,
)
from pai_threads.events.projections import (
    actions_public,
    message_public,
    queue_public,
    run_public,
    thread_public,
)
from pai_threads.models import Message, PendingAction, Run, Thread

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
    "action_answered",
    "actions_changed",
    "empty_side_state",
    "generation_finished",
    "generation_message_chunk",
    "generation_started",
    "message_committed",
    "queue_changed",
    "run_and_side_state",
    "run_status",
    "run_status_of",
    "side_state",
    "stored_message_committed",
    "thread_deleted",
    "thread_updated",
]


class QueueChanged(TypedDict):
    """The thread's queued input (``queue.items``: projected queue items, MF-035)."""

    type: Literal["queue.changed"]
    threadId: str
    queue: dict[str, Any]


class ActionsChanged(TypedDict):
    """The thread's pending actions (MF-024)."""

    type: Literal["actions.changed"]
    threadId: str
    pendingActions: list[dict[str, Any]]


class ThreadUpdated(TypedDict):
    """The thread head changed (title, archived, public metadata, after a rewrite)."""

    type: Literal["thread.updated"]
    threadId: str
    thread: dict[str, Any]


class ThreadDeleted(TypedDict):
    """The thread is gone: subscribers drop it (no snapshot can follow)."""

    type: Literal["thread.deleted"]
    threadId: str


ThreadEvent: TypeAlias = EngineEvent | QueueChanged | ActionsChanged | ThreadUpdated | ThreadDeleted


def queue_changed(thread_id: str, queue: dict[str, Any]) -> QueueChanged:
    return QueueChanged(type="queue.changed", threadId=thread_id, queue=queue)


def actions_changed(thread_id: str, pending_actions: list[dict[str, Any]]) -> ActionsChanged:
    return ActionsChanged(
        type="actions.changed", threadId=thread_id, pendingActions=pending_actions
    )


def thread_updated(thread: Thread) -> ThreadUpdated:
    return ThreadUpdated(type="thread.updated", threadId=thread.id, thread=thread_public(thread))


def thread_deleted(thread_id: str) -> ThreadDeleted:
    return ThreadDeleted(type="thread.deleted", threadId=thread_id)


def run_status_of(run: Run | dict[str, Any]) -> RunStatus:
    """``run.status`` of a stored run (or of its public projection), the projection attached."""
    public = run_public(run) if isinstance(run, Run) else run
    return run_status(
        run_id=public["id"], thread_id=public["threadId"], status=public["status"], run=public
    )


def stored_message_committed(row: Message) -> MessageCommitted:
    """``message.committed`` of a stored row, projected (suspensions joined, MF-023)."""
    return message_committed(thread_id=row.thread_id, message=message_public(row))


def side_state(thread_id: str) -> list[QueueChanged | ActionsChanged]:
    """``queue.changed`` and ``actions.changed`` with the current values (two reads):
    announced after anything that may change them (run status changes, sends, answers,
    cancels)."""
    return [
        queue_changed(thread_id, queue_public(thread_id)),
        actions_changed(thread_id, actions_public(thread_id)),
    ]


def run_and_side_state(thread_id: str, run_id: str) -> list[RunEvent]:
    """``run.status`` of the stored run (read), then :func:`side_state`: what a change of
    the run's state announces (a cancel, queued input, a regenerate, an answer)."""
    run = Run.objects.filter(pk=run_id).first()
    return [*([run_status_of(run)] if run is not None else []), *side_state(thread_id)]


def action_answered(action: PendingAction) -> list[RunEvent]:
    """What an answered action announces: the message holding its tool part (the part and
    its episode changed, MF-023), then the run's status, the queue and the actions."""
    row = Message.objects.filter(thread_id=action.thread_id, message_id=action.message_id).first()
    committed = [stored_message_committed(row)] if row is not None else []
    return [*committed, *run_and_side_state(action.thread_id, action.run_id)]


def empty_side_state(thread_id: str) -> list[QueueChanged | ActionsChanged]:
    """:func:`side_state` of a thread known to have no queued input and no pending action."""
    return [queue_changed(thread_id, {"items": []}), actions_changed(thread_id, [])]
