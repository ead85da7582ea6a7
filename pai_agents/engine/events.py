"""Events the engine emits while a run executes.

The realtime layer wraps these in a sequenced envelope; ``pai_chat`` prints them. Sinks are
awaited inline on the streaming hot path, so they must be cheap (buffer, don't do I/O per
token).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias

__all__ = ["EventSink", "NullSink", "RecordingSink", "RunEvent"]

# {"type": "generation.started", "runId", "threadId", "messageId"}
# {"type": "generation.message.chunk", "runId", "threadId", "messageId", "index", "chunk"}
# {"type": "generation.finished", "runId", "threadId", "messageId", "message"}
# {"type": "run.status", "runId", "threadId", "status"}
RunEvent: TypeAlias = dict[str, Any]


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
