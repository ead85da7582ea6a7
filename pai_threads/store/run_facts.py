"""What an execution's own writes returned, so that nobody reads it back.

The ORM store's hot-path writes return the rows they change (``UPDATE ... RETURNING``) and
record them here; the execution's realtime publisher projects these rows instead of
re-reading the run and the message after every generation and status change, and the store
skips its per-step steer check while a recent write saw an empty queue. Every fact is taken
once: a missing one (another code path wrote, a write returned nothing) means "read the
database", exactly as before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pai_threads.models import Message, Run

__all__ = ["QUEUE_HINT_SECONDS", "RunFacts"]

# How long "a write saw no queued input" spares the next steer check. Input steered in
# between (the engine starts a step milliseconds after its last write) joins a later step,
# or runs after this run, like input that arrives just after a step's check always did.
QUEUE_HINT_SECONDS = 1.0


@dataclass
class RunFacts:
    """Rows one execution wrote, by run and message id. Written by the store's worker
    threads and read on the execution's event loop; the engine awaits each store call before
    it publishes, and every access is a single dict or set operation (the heartbeat may
    record concurrently with another store call)."""

    runs: dict[str, Run] = field(default_factory=dict)
    messages: dict[str, tuple[Message, bool]] = field(default_factory=dict)
    inputs: dict[str, list[Message]] = field(default_factory=dict)
    queue_seen: dict[str, tuple[bool, float]] = field(default_factory=dict)
    empty_sides: set[str] = field(default_factory=set)

    # -- recorded by the store --

    def run_written(self, run: Run) -> None:
        self.runs[run.id] = run

    def message_written(self, row: Message, *, suspensions: bool) -> None:
        """``suspensions``: the message may have suspension episodes to join (MF-023)."""
        self.messages[row.message_id] = (row, suspensions)

    def message_changed(self, message_id: str) -> None:
        """Written without returning the row: the next projection reads it."""
        self.messages.pop(message_id, None)

    def inputs_read(self, run_id: str, rows: list[Message]) -> None:
        self.inputs[run_id] = rows

    def queue_observed(self, run_id: str, queued: bool) -> None:
        self.queue_seen[run_id] = (queued, time.monotonic())

    def queue_unknown(self, run_id: str) -> None:
        self.queue_seen.pop(run_id, None)

    def sides_empty(self, run_id: str) -> None:
        """The run's status write saw no queued input and no pending action in the thread."""
        self.empty_sides.add(run_id)

    # -- taken by the store and the publisher --

    def queue_empty(self, run_id: str) -> bool:
        """A write of the last :data:`QUEUE_HINT_SECONDS` saw no queued input (taken once)."""
        seen = self.queue_seen.pop(run_id, None)
        return seen is not None and not seen[0] and time.monotonic() - seen[1] < QUEUE_HINT_SECONDS

    def take_run(self, run_id: str, status: object) -> Run | None:
        run = self.runs.pop(run_id, None)
        return run if run is not None and run.status == status else None

    def take_message(self, message_id: str) -> tuple[Message, bool] | None:
        return self.messages.pop(message_id, None)

    def take_inputs(self, run_id: str) -> list[Message] | None:
        return self.inputs.pop(run_id, None)

    def take_sides_empty(self, run_id: str) -> bool:
        if run_id in self.empty_sides:
            self.empty_sides.discard(run_id)
            return True
        return False
