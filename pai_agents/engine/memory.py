"""An in-memory :class:`ThreadStore`: fast unit tests and the executable protocol description.

It enforces what the ORM store enforces (fencing tokens, one active run per thread, one
assistant message per step) with plain dicts and one lock, so engine tests written against
it mean the same thing against the database.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pai_agents.engine.store import (
    TERMINAL_STATUSES,
    ClaimedRun,
    Lease,
    LeaseLost,
    RunNotFound,
    RunOutcome,
    StepRecord,
)
from pai_agents.ids import new_id
from pai_agents.messages.types import UIMessage

__all__ = ["InMemoryThreadStore", "MemoryMessage", "MemoryRun"]

ACTIVE_STATUSES = frozenset({"queued", "running", "waiting"})


@dataclass(kw_only=True)
class MemoryRun:
    id: str
    thread_id: str
    agent_name: str
    scope_key: str
    identity: dict[str, Any]
    client_data: dict[str, Any]
    initiator: str = "send"
    status: str = "queued"
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    lease_token: int = 0
    attempt: int = 0
    step_count: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None


@dataclass(kw_only=True)
class MemoryMessage:
    message: UIMessage
    thread_id: str
    run_id: str | None
    position: int
    status: str = "committed"
    step_index: int | None = None
    context: bool = True


class InMemoryThreadStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.threads: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, MemoryRun] = {}
        self.messages: list[MemoryMessage] = []
        self.steps: dict[str, list[StepRecord]] = {}
        self._position = 0

    # -- accepting input (the Django layer's ``send`` does this in one transaction) --

    def create_thread(self, *, scope_key: str, agent_name: str, title: str = "") -> str:
        thread_id = new_id("thr")
        self.threads[thread_id] = {"scope_key": scope_key, "agent_name": agent_name, "title": title}
        return thread_id

    def send(
        self,
        thread_id: str,
        message: UIMessage,
        *,
        identity: dict[str, Any] | None = None,
        client_data: dict[str, Any] | None = None,
    ) -> str:
        with self._lock:
            thread = self.threads[thread_id]
            if any(
                r.thread_id == thread_id and r.status in ACTIVE_STATUSES for r in self.runs.values()
            ):
                raise RuntimeError("thread already has an active run")
            run = MemoryRun(
                id=new_id("run"),
                thread_id=thread_id,
                agent_name=thread["agent_name"],
                scope_key=thread["scope_key"],
                identity=identity or {},
                client_data=client_data or {},
            )
            self.runs[run.id] = run
            self._append(
                MemoryMessage(
                    message=copy.deepcopy(message), thread_id=thread_id, run_id=run.id, position=0
                )
            )
            return run.id

    def thread_messages(self, thread_id: str) -> list[UIMessage]:
        return [copy.deepcopy(m.message) for m in self.messages if m.thread_id == thread_id]

    # -- ThreadStore --

    async def claim_run(self, run_id: str, *, owner: str, lease_seconds: float) -> ClaimedRun:
        now = datetime.now(UTC)
        with self._lock:
            run = self.runs.get(run_id)
            expired = (
                run is not None
                and run.status == "running"
                and (run.lease_expires_at is None or run.lease_expires_at < now)
            )
            if run is None or not (run.status == "queued" or expired):
                raise RunNotFound(run_id)
            run.status = "running"
            run.lease_owner = owner
            run.lease_expires_at = now + timedelta(seconds=lease_seconds)
            run.lease_token += 1
            run.attempt += 1
            return ClaimedRun(
                lease=Lease(
                    run_id=run.id,
                    owner=owner,
                    token=run.lease_token,
                    thread_id=run.thread_id,
                    scope_key=run.scope_key,
                ),
                thread_id=run.thread_id,
                agent_name=run.agent_name,
                scope_key=run.scope_key,
                identity=dict(run.identity),
                client_data=dict(run.client_data),
                initiator=run.initiator,
                step_count=run.step_count,
                attempt=run.attempt,
            )

    def _fenced(self, lease: Lease) -> MemoryRun:
        run = self.runs.get(lease.run_id)
        if run is None or run.lease_token != lease.token or run.status != "running":
            raise LeaseLost(lease.run_id)
        return run

    async def heartbeat(self, lease: Lease, *, lease_seconds: float) -> None:
        with self._lock:
            run = self._fenced(lease)
            run.lease_expires_at = datetime.now(UTC) + timedelta(seconds=lease_seconds)

    async def load_context(self, lease: Lease) -> list[UIMessage]:
        with self._lock:
            run = self._fenced(lease)
            return [
                copy.deepcopy(m.message)
                for m in self.messages
                if m.thread_id == run.thread_id and m.context and m.status == "committed"
            ]

    async def commit_step(
        self,
        lease: Lease,
        *,
        message: UIMessage,
        step: StepRecord,
        outcome: RunOutcome | None = None,
    ) -> None:
        with self._lock:
            run = self._fenced(lease)
            if any(m.run_id == run.id and m.step_index == step.index for m in self.messages):
                raise ValueError(f"run {run.id} already has a message for step {step.index}")
            self._append(
                MemoryMessage(
                    message=copy.deepcopy(message),
                    thread_id=run.thread_id,
                    run_id=run.id,
                    position=0,
                    step_index=step.index,
                )
            )
            self.steps.setdefault(run.id, []).append(step)
            run.step_count = step.index + 1
            if outcome is not None:
                self._end(run, outcome)

    async def update_message(
        self, lease: Lease, *, message: UIMessage, outcome: RunOutcome | None = None
    ) -> None:
        with self._lock:
            run = self._fenced(lease)
            for stored in self.messages:
                if stored.run_id == run.id and stored.message["id"] == message["id"]:
                    stored.message = copy.deepcopy(message)
                    break
            else:
                raise LookupError(f"run {run.id} has no message {message['id']}")
            if outcome is not None:
                self._end(run, outcome)

    async def finish_run(self, lease: Lease, outcome: RunOutcome) -> None:
        with self._lock:
            self._end(self._fenced(lease), outcome)

    # -- internals --

    def _append(self, stored: MemoryMessage) -> None:
        self._position += 1
        stored.position = self._position
        self.messages.append(stored)

    @staticmethod
    def _end(run: MemoryRun, outcome: RunOutcome) -> None:
        run.status = outcome.status
        run.usage = dict(outcome.usage)
        run.error = dict(outcome.error) if outcome.error else None
        if outcome.status in TERMINAL_STATUSES or outcome.status == "waiting":
            run.lease_owner = None
            run.lease_expires_at = None
