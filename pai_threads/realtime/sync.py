"""Delivering a thread's events to one subscriber: in order, each exactly once.

:func:`open_frames` is what a subscriber sends when it connects or reconnects: either the
events missed since the client's last sequence number (a resume) or a fresh snapshot, then
the active generation replayed from chunk index 0 (MF-028), then a ``synced`` frame with the
sequence number live delivery continues from. :class:`Cursor` then admits live batches:
duplicates are dropped, and a gap (the channel layer drops messages for full channels) is
filled from the replay buffer, or raises :class:`Resync` when the buffer no longer has it.
:class:`FoldGuard` withholds chunks a client has no ``generation.started`` for, and a
stale ``run.status`` that would take back a run's end.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pai_agents.engine.events import RunEvent
from pai_agents.engine.store import TERMINAL_STATUSES
from pai_threads.realtime.buffers import ActiveGeneration, ReplayBuffer

__all__ = ["Cursor", "FoldGuard", "Resync", "open_frames", "replay_frames"]

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
        frames += [
            dict(e) for e in missed if generation is None or not _of_generation(e, generation)
        ]
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

    def admit_next(self, events: Sequence[RunEvent]) -> bool:
        """Advance over a live batch that is exactly the next numbers, in order (the live
        path, without a read); False leaves the cursor as it was, for :meth:`admit`."""
        last, count = self.last, len(events)
        if (
            count
            and int(events[0]["seq"]) == last + 1
            and (count == 1 or _contiguous(events, last, last + count))
        ):
            self.last = last + count
            return True
        return False

    async def admit(self, events: Sequence[RunEvent]) -> list[RunEvent]:
        """The events of a live batch to deliver now, gap-filled, in order.

        All or nothing: if a refill fails (the buffer is unreachable), the cursor stays
        where it was and the same events are admitted again later."""
        if self.admit_next(events):
            return list(events)
        last = self.last
        admitted: list[RunEvent] = []
        for event in sorted(events, key=lambda e: int(e["seq"])):
            seq = int(event["seq"])
            if seq <= last:
                continue  # already delivered (a refill got there first)
            if seq > last + 1:
                admitted += await self._read(last, seq - 1)
            admitted.append(event)
            last = seq
        self.last = last
        return admitted

    async def catch_up(self) -> list[RunEvent]:
        """Events appended but never received (a dropped last message), from the buffer."""
        state = await self.buffer.state(self.thread_id)
        if state.last_seq <= self.last:
            return []
        events = await self._read(self.last, state.last_seq)
        self.last = state.last_seq
        return events

    async def _read(self, after: int, upto: int) -> list[RunEvent]:
        events = await self.buffer.read(self.thread_id, after=after, upto=upto)
        if not _contiguous(events, after, upto):
            raise Resync(f"events {after + 1}..{upto} are no longer buffered")
        logger.debug("refilled events %d..%d of thread %s", after + 1, upto, self.thread_id)
        return list(events)


class FoldGuard:
    """Keeps frames from a client that cannot fold them.

    A client folds ``generation.message.chunk`` onto the shell its ``generation.started``
    (live or replayed) created. After a resync whose buffer lost a generation's start (a
    Redis restart mid-generation) the rest of that generation's chunks would land on
    nothing: they are withheld, and its ``generation.finished`` brings the whole message.

    A run's end (``completed``, ``failed``, ``cancelled``, ``blocked``) is final, so a
    ``run.status`` that would take a run the client saw end back to ``queued``, ``running``
    or ``waiting`` is withheld too. An operation reads the run and publishes after its
    commit; the run may end in between (a cancel whose abort ends a run in this process, a
    worker ending it in another), and that stale read can be numbered after the end.
    """

    def __init__(self) -> None:
        self._started: set[str] = set()
        # Runs seen ended: kept across resets (an end is a fact of the run, not of the view).
        self._ended: set[str] = set()

    def reset(self) -> None:
        """A snapshot replaces the client's state: only replays that follow it count."""
        self._started.clear()

    def admit(self, frame: Frame) -> bool:
        kind = frame.get("type")
        if kind == "generation.message.chunk":  # first: once per token
            return str(frame.get("messageId")) in self._started
        if kind == "generation.started":
            self._started.add(str(frame.get("messageId")))
        elif kind == "generation.finished":
            self._started.discard(str(frame.get("messageId")))
        elif kind == "run.status":
            return self._run_status(str(frame.get("runId")), frame.get("status"))
        elif kind == "snapshot":
            for run in (frame.get("state") or {}).get("runs") or ():
                if run.get("status") in TERMINAL_STATUSES:
                    self._ended.add(str(run.get("id")))
        return True

    def _run_status(self, run_id: str, status: Any) -> bool:
        if status in TERMINAL_STATUSES:
            self._ended.add(run_id)
            return True
        return run_id not in self._ended
