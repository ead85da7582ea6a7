"""What one W4/W5 websocket client keeps of its stream (:class:`ClientStream`), as a real
client keeps it through resyncs; :mod:`benchmarks.streaming` runs the clients."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from benchmarks.agents import STAMP

__all__ = ["TERMINAL", "ClientStream"]

TERMINAL = frozenset({"completed", "failed", "cancelled", "waiting"})

# A chunk frame's ``index`` (the server's JSON: ``"index": 12``; a quote inside a string
# value is escaped, so only the frame's own key matches).
_INDEX = re.compile(r'"index":\s*(\d+)')


@dataclass
class ClientStream:
    """One client's view of its stream, kept as a real client keeps it.

    The protocol sends each live event once, but after a resync (a ``snapshot`` the
    consumer sends when it cannot fill a gap from the replay buffer, or after a
    channel-layer or buffer outage) it replays the active generation from chunk index 0:
    a client resets that message and folds the chunks again (docs/realtime.md), so a
    delta it already had arrives twice. A delta counts once, identified by its *due* stamp
    (unique per delta of a stream), and its latency is that of its first arrival. After a
    resync the client also has the deltas of the stored messages the snapshot (or a
    ``generation.finished``) carries: the consumer withholds the chunks of a generation
    the snapshot already holds as a stored message."""

    thread_id: str
    start_ns: int = 0
    delivery: list[int] = field(default_factory=list)  # received - yielded, ns (first arrival)
    from_due: list[int] = field(default_factory=list)  # received - due, ns
    lag: list[int] = field(default_factory=list)  # yielded - due, ns
    first_due: int = 0
    first_rx: int = 0
    last_rx: int = 0
    acked_ns: int = 0
    resets: int = 0  # reset-step frames: a step streamed again (model retry, recovery)
    status: str = ""
    error: str = ""
    run_id: str = ""
    seen: set[int] = field(default_factory=set)  # due stamps of the deltas the client has
    frames: int = 0  # text-delta frames received, replays included
    replayed: int = 0  # of those, marked ``replay`` (after a snapshot)
    repeated: int = 0  # of those, for a delta the client already had
    from_messages: int = 0  # deltas first had from a stored message after a resync
    resyncs: int = 0  # snapshot frames after the one of the connect
    disorder: int = 0  # chunks out of index order since the last resync
    next_index: int | None = None  # the chunk index the open message folds next

    def take(self, raw: str, now: int) -> bool:
        """Fold one frame received at ``now``; True when the stream is over (its run ended,
        or an error frame)."""
        if '"generation.message.chunk"' in raw:
            self._chunk(raw)
            if '"text-delta"' in raw:
                self._delta(raw, now)
            elif '"reset-step"' in raw:
                self.resets += 1
            return False
        if '"generation.started"' in raw:
            self.next_index = 0  # live or replayed: the message starts (again) empty
            return False
        if '"generation.finished"' in raw:
            if self.resyncs:
                self._from_message(raw)
            return False
        if '"snapshot"' in raw or '"run.status"' in raw or '"error"' in raw or '"ack"' in raw:
            return self._control(json.loads(raw), raw, now)
        return False

    def _chunk(self, raw: str) -> None:
        match = _INDEX.search(raw)
        index = int(match.group(1)) if match else -1
        if index != self.next_index:
            self.disorder += 1
        self.next_index = index + 1

    def _delta(self, raw: str, now: int) -> None:
        self.frames += 1
        if '"replay": true' in raw:
            self.replayed += 1
        match = STAMP.search(raw)
        if match is None:
            return
        due, yielded = int(match.group(1)), int(match.group(2))
        if due in self.seen:
            self.repeated += 1
            return
        self.seen.add(due)
        self.delivery.append(now - yielded)
        self.from_due.append(now - due)
        self.lag.append(yielded - due)
        if not self.first_rx:
            self.first_rx, self.first_due = now, due
        self.last_rx = now

    def _from_message(self, raw: str) -> None:
        """The deltas of stored messages in ``raw`` the client did not have yet."""
        for due_text, _yielded in STAMP.findall(raw):
            due = int(due_text)
            if due not in self.seen:
                self.seen.add(due)
                self.from_messages += 1

    def _control(self, frame: dict[str, Any], raw: str, now: int) -> bool:
        kind = frame.get("type")
        if kind == "ack":
            self.acked_ns = now
            self.run_id = str((frame.get("run") or {}).get("id") or "")
        elif kind == "error":
            self.error = f"{frame.get('code')}: {frame.get('message')}"
            return True
        elif kind == "run.status" and frame.get("status") in TERMINAL:
            self.status = str(frame["status"])
            return True
        elif kind == "snapshot":
            # The client's state is the snapshot's now: the open message is rebuilt by the
            # replay that follows (or arrives whole with its generation.finished).
            self.resyncs += 1
            self.disorder = 0
            self.next_index = None
            self._from_message(raw)
            runs = (frame.get("state") or {}).get("runs") or []
            ours = [r for r in runs if r.get("id") == self.run_id] or runs[-1:]
            if ours and ours[0].get("status") in TERMINAL:
                self.status = str(ours[0]["status"])  # ended while the client resynced
                return True
        return False
