"""Events the engine emits while a run executes: their types and constructors.

The engine's part of the event vocabulary (docs/realtime.md): each event is a
``TypedDict`` whose ``type`` is a ``Literal``, built by the constructor of the same name.
The thread-level events (queue, actions, thread head, ...) are in
:mod:`pai_threads.events`, which re-exports these. The realtime layer wraps events in a
sequenced envelope; ``pai_chat`` prints them. Sinks are awaited inline on the streaming hot
path, so they must be cheap (buffer, don't do I/O per token).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, Protocol, TypeAlias, TypedDict

__all__ = [
    "EngineEvent",
    "EventSink",
    "GenerationFinished",
    "GenerationMessageChunk",
    "GenerationStarted",
    "MessageCommitted",
    "NullSink",
    "RecordingSink",
    "RunEvent",
    "RunStatus",
    "generation_finished",
    "generation_message_chunk",
    "generation_started",
    "message_committed",
    "run_status",
]


class GenerationStarted(TypedDict):
    """A model step opens assistant message ``messageId`` (``restarted``: a dead attempt's
    open message is produced again, clients reset it; ``continued``: results join a
    committed message)."""

    type: Literal["generation.started"]
    runId: str
    threadId: str
    messageId: str
    step: NotRequired[int | None]
    restarted: NotRequired[bool]
    continued: NotRequired[bool]


class GenerationMessageChunk(TypedDict):
    """One UI message chunk of the open generation, numbered by ``index`` from 0."""

    type: Literal["generation.message.chunk"]
    runId: str
    threadId: str
    messageId: str
    index: int
    chunk: dict[str, Any]


class GenerationFinished(TypedDict):
    """The generation's message as stored (the realtime layer attaches the projection);
    ``None`` when the run ended before anything of it was stored (clients drop it)."""

    type: Literal["generation.finished"]
    runId: str
    threadId: str
    messageId: str
    message: dict[str, Any] | None


class RunStatus(TypedDict):
    """The run's status changed; ``run`` is its public projection when the publisher has it."""

    type: Literal["run.status"]
    runId: str
    threadId: str
    status: str
    run: NotRequired[dict[str, Any]]


class MessageCommitted(TypedDict):
    """A message was stored outside a generation (user input, an answered tool call)."""

    type: Literal["message.committed"]
    threadId: str
    message: dict[str, Any]


EngineEvent: TypeAlias = (
    GenerationStarted | GenerationMessageChunk | GenerationFinished | RunStatus | MessageCommitted
)

# What a sink receives: any event of the vocabulary (engine or thread level). A read-only
# mapping, so every TypedDict of the vocabulary (and a plain dict) is one.
RunEvent: TypeAlias = Mapping[str, Any]


def generation_started(
    *,
    run_id: str,
    thread_id: str,
    message_id: str,
    step: int | None = None,
    restarted: bool = False,
    continued: bool = False,
) -> GenerationStarted:
    event = GenerationStarted(
        type="generation.started",
        runId=run_id,
        threadId=thread_id,
        messageId=message_id,
        step=step,
    )
    if restarted:
        event["restarted"] = True
    if continued:
        event["continued"] = True
    return event


def generation_message_chunk(
    *, run_id: str, thread_id: str, message_id: str, index: int, chunk: Mapping[str, Any]
) -> GenerationMessageChunk:
    return GenerationMessageChunk(
        type="generation.message.chunk",
        runId=run_id,
        threadId=thread_id,
        messageId=message_id,
        index=index,
        chunk=dict(chunk) if not isinstance(chunk, dict) else chunk,
    )


def generation_finished(
    *, run_id: str, thread_id: str, message_id: str, message: Mapping[str, Any] | None
) -> GenerationFinished:
    return GenerationFinished(
        type="generation.finished",
        runId=run_id,
        threadId=thread_id,
        messageId=message_id,
        message=dict(message) if message is not None and not isinstance(message, dict) else message,
    )


def run_status(
    *, run_id: str, thread_id: str, status: str, run: Mapping[str, Any] | None = None
) -> RunStatus:
    event = RunStatus(type="run.status", runId=run_id, threadId=thread_id, status=status)
    if run is not None:
        event["run"] = dict(run)
    return event


def message_committed(thread_id: str, message: Mapping[str, Any]) -> MessageCommitted:
    return MessageCommitted(
        type="message.committed",
        threadId=thread_id,
        message=dict(message) if not isinstance(message, dict) else message,
    )


class EventSink(Protocol):
    async def publish(self, event: RunEvent) -> None: ...


class NullSink:
    """Drops every event (runs nobody watches)."""

    async def publish(self, event: RunEvent) -> None:
        return None


class RecordingSink:
    """Keeps every event in memory, for tests and ``--jsonl`` output."""

    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    async def publish(self, event: RunEvent) -> None:
        self.events.append(event)

    def chunks(self, message_id: str | None = None) -> list[dict[str, Any]]:
        return [
            e["chunk"]
            for e in self.events
            if e["type"] == "generation.message.chunk"
            and (message_id is None or e["messageId"] == message_id)
        ]
