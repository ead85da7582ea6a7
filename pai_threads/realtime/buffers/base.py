"""The replay buffer interface: a per-thread, sequenced log of realtime events.

Every event published for a thread gets the next number of that thread's sequence and is
kept in its log, so a consumer can (a) fill a gap left by the channel layer, which drops
messages when a consumer's channel is full, (b) resume a client from its last sequence
number, and (c) replay the active generation from chunk index 0 to a client that connects
mid-generation. The log is not durable storage: committed messages in the database are the
recovery authority; a log expires ``REALTIME_REPLAY_TTL`` seconds after its last event.

Sequences never go backwards for a thread, even across log expiry or a server restart: a new
log starts at ``time_ms * 1000``, so a client holding a number from an expired log sees a
gap it cannot fill and gets a fresh snapshot instead of silently missing events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pai_agents.engine.events import RunEvent

__all__ = [
    "ActiveGeneration",
    "LogState",
    "ReplayBuffer",
    "generation_mark",
    "sequence_base",
]

# Run statuses after which a run streams nothing more until it is resumed or recovered.
RUN_STREAMING_STATUSES = frozenset({"queued", "running"})


@dataclass(frozen=True, kw_only=True)
class ActiveGeneration:
    """The generation (open assistant message) a thread is streaming, and where it began."""

    message_id: str
    run_id: str
    start_seq: int


@dataclass(frozen=True, kw_only=True)
class LogState:
    """``first_seq`` is the oldest retained event (``last_seq + 1`` when the log is empty)."""

    first_seq: int
    last_seq: int
    generation: ActiveGeneration | None


class ReplayBuffer(Protocol):
    """Backends: :mod:`.memory` (one process) and :mod:`.redis` (shared by processes)."""

    async def append(self, thread_id: str, events: Sequence[RunEvent]) -> list[RunEvent]:
        """Number ``events`` atomically and store them; return copies carrying ``seq``."""
        ...

    async def state(self, thread_id: str) -> LogState:
        """The log's bounds and active generation (creating an empty log if there is none)."""
        ...

    async def read(self, thread_id: str, *, after: int, upto: int) -> list[RunEvent]:
        """Retained events with ``after < seq <= upto``, in order (possibly with a hole at
        the front when they were trimmed or expired: callers check ``first_seq``)."""
        ...


Mark = tuple[Literal["start"], str, str] | tuple[Literal["end"], str] | tuple[Literal["run"], str]


def generation_mark(event: RunEvent) -> Mark | None:
    """How an event moves the active-generation pointer: starts one, ends one, or ends the
    generation of a run that stopped streaming (cancelled, failed, waiting)."""
    kind = event.get("type")
    if kind == "generation.started":
        return ("start", str(event["messageId"]), str(event["runId"]))
    if kind == "generation.finished":
        return ("end", str(event["messageId"]))
    if kind == "run.status" and event.get("status") not in RUN_STREAMING_STATUSES:
        return ("run", str(event["runId"]))
    return None


def sequence_base(now_ms: int) -> int:
    """The ``last_seq`` of a new, empty log: far above any number an expired log reached."""
    return now_ms * 1000


def with_seq(event: RunEvent, seq: int) -> dict[str, Any]:
    return {**event, "seq": seq}
