"""The in-process replay buffer: the embedded default (executor and consumers share a process).

Thread-safe: runs publish from the executor's loop thread while consumers read from the
server's loop. Each operation holds one lock for a few dict/deque operations, never across
an ``await``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice

from pai_agents.engine.events import RunEvent
from pai_threads.realtime.buffers.base import (
    ActiveGeneration,
    LogState,
    generation_mark,
    sequence_base,
    with_seq,
)
from pai_threads.realtime.conf import realtime_setting

__all__ = ["MemoryReplayBuffer"]

_SWEEP_INTERVAL = 10.0
_CHUNK = "generation.message.chunk"


@dataclass
class _Log:
    last_seq: int
    touched: float
    events: deque[RunEvent] = field(default_factory=deque)
    generation: ActiveGeneration | None = None

    @property
    def first_seq(self) -> int:
        return int(self.events[0]["seq"]) if self.events else self.last_seq + 1


class MemoryReplayBuffer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[str, _Log] = {}
        self._last_sweep = time.monotonic()

    def _log(self, thread_id: str, now: float) -> _Log:
        """The thread's live log, creating it (after sweeping expired ones) when needed."""
        ttl = float(realtime_setting("REALTIME_REPLAY_TTL"))
        if now - self._last_sweep > _SWEEP_INTERVAL:
            self._last_sweep = now
            for key in [k for k, log in self._logs.items() if now - log.touched > ttl]:
                del self._logs[key]
        log = self._logs.get(thread_id)
        if log is None or now - log.touched > ttl:
            log = self._logs[thread_id] = _Log(
                last_seq=sequence_base(time.time_ns() // 1_000_000), touched=now
            )
        return log

    async def append(self, thread_id: str, events: Sequence[RunEvent]) -> list[RunEvent]:
        return self.append_now(thread_id, events)

    def append_now(self, thread_id: str, events: Sequence[RunEvent]) -> list[RunEvent]:
        """:meth:`append` without its coroutine (it never waits): for in-process delivery,
        which numbers every token's batch this way."""
        retained = int(realtime_setting("REALTIME_RETAINED_EVENTS"))
        with self._lock:
            now = time.monotonic()
            log = self._log(thread_id, now)
            log.touched = now
            numbered: list[RunEvent] = []
            for event in events:
                log.last_seq += 1
                item = with_seq(event, log.last_seq)
                log.events.append(item)
                numbered.append(item)
                if item["type"] != _CHUNK:  # (a token's chunk never moves the generation)
                    _move_generation(log, item)
            # Trim finished history only: the active generation must replay from index 0.
            floor = log.generation.start_seq if log.generation else log.last_seq + 1
            while len(log.events) > retained and int(log.events[0]["seq"]) < floor:
                log.events.popleft()
            return numbered

    async def state(self, thread_id: str) -> LogState:
        with self._lock:
            log = self._log(thread_id, time.monotonic())
            return LogState(
                first_seq=log.first_seq, last_seq=log.last_seq, generation=log.generation
            )

    async def read(self, thread_id: str, *, after: int, upto: int) -> list[RunEvent]:
        with self._lock:
            log = self._logs.get(thread_id)
            if log is None:
                return []
            # Numbers are contiguous from the oldest retained event: slice, do not scan.
            first = log.first_seq
            start, stop = max(after + 1, first) - first, min(upto, log.last_seq) + 1 - first
            return list(islice(log.events, start, stop)) if stop > start else []


def _move_generation(log: _Log, event: RunEvent) -> None:
    mark = generation_mark(event)
    if mark is None:
        return
    current = log.generation
    if mark[0] == "start":
        log.generation = ActiveGeneration(
            message_id=mark[1], run_id=mark[2], start_seq=int(event["seq"])
        )
    elif current is not None and (
        (mark[0] == "end" and current.message_id == mark[1])
        or (mark[0] == "run" and current.run_id == mark[1])
    ):
        log.generation = None
