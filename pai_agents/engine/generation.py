"""One assistant message being produced, and the run events that frame it.

A :class:`Generation` folds every chunk into the message with the same reducer clients use
and publishes it, indexed, so a client replaying a generation's chunks from index 0 rebuilds
exactly the stored message. The other helpers here publish the events that end a
generation or report a run's status: the only places the engine builds events.
"""

from __future__ import annotations

from typing import Any

from pai_agents.engine.events import (
    EventSink,
    generation_finished,
    generation_message_chunk,
    generation_started,
    run_status,
)
from pai_agents.engine.store import ClaimedRun, RunOutcome
from pai_agents.messages.reducer import MessageReducer
from pai_agents.messages.types import UIMessage, UIMessageChunk

__all__ = [
    "FINISH_REASONS",
    "Generation",
    "end_chunks",
    "publish_finished",
    "publish_generation_finished",
    "publish_status",
]

FINISH_REASONS = frozenset(
    {"stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"}
)


class Generation:
    """One assistant message being produced: folds chunks and publishes them, indexed."""

    __slots__ = ("checkpointed", "claim", "index", "message_id", "reducer", "sink", "tool_data")

    def __init__(self, claim: ClaimedRun, sink: EventSink, message: UIMessage) -> None:
        self.claim = claim
        self.sink = sink
        self.message_id = message["id"]
        self.reducer = MessageReducer(message)
        self.index = 0
        # Whether the open message is stored (a checkpoint, or a dead attempt's row).
        self.checkpointed = False
        self.tool_data: Any = None  # the running calls' ToolDataHub, made on first use

    @property
    def message(self) -> UIMessage:
        return self.reducer.message

    async def start(
        self, *, step: int | None, restarted: bool = False, continued: bool = False
    ) -> None:
        """Announce the generation. ``restarted``: a dead attempt's open message is being
        produced again (clients reset it); ``continued``: results join a committed message."""
        await self.sink.publish(
            generation_started(
                run_id=self.claim.lease.run_id,
                thread_id=self.claim.thread_id,
                message_id=self.message_id,
                step=step,
                restarted=restarted,
                continued=continued,
            )
        )

    async def emit(self, *chunks: UIMessageChunk) -> None:
        run_id, thread_id = self.claim.lease.run_id, self.claim.thread_id
        apply, publish, message_id = self.reducer.apply, self.sink.publish, self.message_id
        for chunk in chunks:  # once per token: no work that does not need doing here
            apply(chunk)
            await publish(
                generation_message_chunk(
                    run_id=run_id,
                    thread_id=thread_id,
                    message_id=message_id,
                    index=self.index,
                    chunk=chunk,
                )
            )
            self.index += 1


def end_chunks(finish_reason: str) -> list[UIMessageChunk]:
    """The chunks that close a step's message (an unknown reason becomes ``other``)."""
    reason = finish_reason if finish_reason in FINISH_REASONS else "other"
    return [{"type": "finish-step"}, {"type": "finish", "finishReason": reason}]


async def publish_generation_finished(
    sink: EventSink, claim: ClaimedRun, message: UIMessage
) -> None:
    await sink.publish(
        generation_finished(
            run_id=claim.lease.run_id,
            thread_id=claim.thread_id,
            message_id=message["id"],
            message=message,
        )
    )


async def publish_status(sink: EventSink, claim: ClaimedRun, outcome: RunOutcome) -> None:
    await sink.publish(
        run_status(run_id=claim.lease.run_id, thread_id=claim.thread_id, status=outcome.status)
    )


async def publish_finished(
    sink: EventSink, claim: ClaimedRun, message: UIMessage, outcome: RunOutcome
) -> None:
    """The run's last generation ended with ``outcome``."""
    await publish_generation_finished(sink, claim, message)
    await publish_status(sink, claim, outcome)
