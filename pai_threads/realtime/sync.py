"""Delivering a thread's events to one subscriber: in order, each exactly once.

:func:`open_frames` is what a subscriber sends when it connects or reconnects: either the
events missed since the client's last sequence number (a resume) or a fresh snapshot, then
the active generation replayed from chunk index 0 (MF-028), then a ``synced`` frame with the
sequence number live delivery continues from. :class:`Cursor` then admits live batches:
duplicates are dropped, and a gap (the channel layer drops messages for full channels) is
filled from the replay buffer, or raises :class:`Resync` when the buffer no longer has it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pai_agents.engine.events import RunEvent
from pai_threads.realtime.buffers import ActiveGeneration, ReplayBuffer

__all__ = ["Cursor", "Resync", "open_frames", "replay_frames"]

logger = logging.getLogger("pai.realtime")

Frame = dict[str, Any]

_RUN_ACTIVE = frozenset({"queued", "running"})


class Resync(Exception):
    """The subscriber missed events the buffer no longer has: send a fresh snapshot."""


def _contiguous(events: Sequence[RunEvent], after: int, upto: int) -> bool:
    return [int(e["seq"]) for e in events] == list(range(after + 1, upto + 1))


def _of_generation(event: RunEvent, generation: ActiveGeneration) -> bool:
    return (
        event.get("type") in ("generation.started", "generation.message.chunk")
        and event.get("messageId") == generation.message_id
    )


def replay_frames(events: Sequence[RunEvent], generation: ActiveGeneration) -> list[Frame]:
    """The generation's ``generation.started`` and chunks, marked ``replay`` and unnumbered:
    the client resets that message to an empty shell and folds the chunks from index 0."""
    frames: list[Frame] = []
    for event in events:
        if _of_generation(event, generation):
            frame = {k: v for k, v in event.items() if k != "seq"}
            frame["replay"] = True
            frames.append(frame)
    return frames


async def open_frames(
    buffer: ReplayBuffer,
    thread_id: str,
    *,
    since: int | None,
    load_snapshot: Callable[[], Awaitable[dict[str, Any]]],
) -> tuple[list[Frame], int]:
    """The frames that bring a client up to date, and the sequence number they reach.

    The buffer state is read *before* the snapshot: anything committed in between shows up
    both in the snapshot and as a later event, and applying a fact twice is harmless
    (messages are replaced by id) while missing one is not.
    """
    state = await buffer.state(thread_id)
    generation = state.generation
    frames: list[Frame] = []
    missed: list[RunEvent] | None = None
    if since is not None and state.first_seq <= since + 1 <= state.last_seq + 1:
        missed = await buffer.read(thread_id, after=since, upto=state.last_seq)
        if not _contiguous(missed, since, state.last_seq):
            missed = None
    if missed is not None:
        frames.append({"type": "resumed", "since": since})
        frames += [e for e in missed if generation is None or not _of_generation(e, generation)]
    else:
        snapshot = await load_snapshot()
        frames.append({"type": "snapshot", "seq": state.last_seq, "state": snapshot})
        runs = {run["id"]: run["status"] for run in snapshot.get("runs", [])}
        if generation is not None and runs.get(generation.run_id) not in _RUN_ACTIVE:
            generation = None  # abandoned by a crashed or stopped run: nothing to rebuild
    if generation is not None:
        events = await buffer.read(thread_id, after=generation.start_seq - 1, upto=state.last_seq)
        frames += replay_frames(events, generation)
    frames.append({"type": "synced", "seq": state.last_seq})
    return frames, state.last_seq


@dataclass
class Cursor:
    """The last sequence number delivered to one subscriber."""

    buffer: ReplayBuffer
    thread_id: str
    last: int

    async def admit(self, events: Sequence[RunEvent]) -> list[RunEvent]:
        """The events of a live batch to deliver now, gap-filled, in order."""
        admitted: list[RunEvent] = []
        for event in sorted(events, key=lambda e: int(e["seq"])):
            seq = int(event["seq"])
            if seq <= self.last:
                continue  # already delivered (a refill got there first)
            if seq > self.last + 1:
                admitted += await self._fill(seq - 1)
            admitted.append(event)
            self.last = seq
        return admitted

    async def catch_up(self) -> list[RunEvent]:
        """Events appended but never received (a dropped last message), from the buffer."""
        state = await self.buffer.state(self.thread_id)
        if state.last_seq <= self.last:
            return []
        return await self._fill(state.last_seq)

    async def _fill(self, upto: int) -> list[RunEvent]:
        events = await self.buffer.read(self.thread_id, after=self.last, upto=upto)
        if not _contiguous(events, self.last, upto):
            raise Resync(f"events {self.last + 1}..{upto} are no longer buffered")
        logger.debug("refilled events %d..%d of thread %s", self.last + 1, upto, self.thread_id)
        self.last = upto
        return list(events)
