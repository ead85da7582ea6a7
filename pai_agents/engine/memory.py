"""An in-memory :class:`ThreadStore`: fast unit tests and the executable protocol description.

It enforces what the ORM store enforces (fencing tokens, one active run per thread, one
assistant message per step) with plain dicts and one lock, so engine tests written against
it mean the same thing against the database.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pai_agents.engine.memory_lifecycle import EngineLifecycleBackend, lease_holds
from pai_agents.engine.memory_rows import MemoryMessage, MemoryRun
from pai_agents.engine.store import (
    TERMINAL_STATUSES,
    ActionRequest,
    ClaimedRun,
    Lease,
    LeaseLost,
    OpenMessageConflict,
    RunNotFound,
    RunOutcome,
    RunSignals,
    StepRecord,
    step_diagnostics,
)
from pai_agents.ids import new_id
from pai_agents.lifecycle.suspensions import SuspensionEpisode
from pai_agents.messages.parts import check_part_types
from pai_agents.messages.types import UIMessage
from pai_agents.models.base import Usage

__all__ = ["InMemoryThreadStore", "MemoryMessage", "MemoryRun"]

ACTIVE_STATUSES = frozenset({"queued", "running", "waiting"})


class InMemoryThreadStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.threads: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, MemoryRun] = {}
        self.messages: list[MemoryMessage] = []
        self.steps: dict[str, list[StepRecord]] = {}
        self.actions: dict[tuple[str, str], dict[str, Any]] = {}  # each call's latest episode
        # Earlier episodes of calls that suspended again (declared suspensions), oldest first.
        self.past_actions: dict[tuple[str, str], list[dict[str, Any]]] = {}
        # Input sent with the steer policy, per thread, waiting for the active run's next step.
        self.steering: dict[str, list[UIMessage]] = {}
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

    def steer(self, thread_id: str, message: UIMessage) -> None:
        """Queue input with the steer policy (the Django layer's ``send`` does this)."""
        with self._lock:
            self.steering.setdefault(thread_id, []).append(copy.deepcopy(message))

    def thread_messages(self, thread_id: str) -> list[UIMessage]:
        return [copy.deepcopy(m.message) for m in self.messages if m.thread_id == thread_id]

    def client_messages(self, thread_id: str) -> list[UIMessage]:
        """The thread as clients see it (with ``metadata.pai``)."""
        return [m.client_message() for m in self.messages if m.thread_id == thread_id]

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
            last = next(
                (
                    m
                    for m in reversed(self.messages)
                    if m.run_id == run.id and m.step_index is not None
                ),
                None,
            )
            run.status = "running"
            run.lease_owner = owner
            run.lease_expires_at = now + timedelta(seconds=lease_seconds)
            run.lease_token += 1
            run.attempt += 1
            if run.started_at is None:
                run.started_at = now
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
                usage=dict(run.usage),  # type: ignore[arg-type]
                last_message=copy.deepcopy(last.message) if last else None,
                last_message_open=bool(last and last.status == "open"),
                executing_tool_calls=frozenset(
                    call_id
                    for (run_id, call_id), action in self.actions.items()
                    if run_id == run.id and action["status"] == "executing"
                ),
                started_at=run.started_at,
                cancel_requested=run.cancel_requested,
            )

    def _fenced(self, lease: Lease, *, renewal: bool = False) -> MemoryRun:
        run = self.runs.get(lease.run_id)
        if run is None or not lease_holds(run, lease.token, renewal=renewal):
            raise LeaseLost(lease.run_id)
        return run

    async def heartbeat(self, lease: Lease, *, lease_seconds: float) -> RunSignals:
        with self._lock:
            run = self._fenced(lease, renewal=True)  # an expired, untaken lease renews
            run.lease_expires_at = datetime.now(UTC) + timedelta(seconds=lease_seconds)
            return RunSignals(cancel_requested=run.cancel_requested)

    async def checkpoint_message(
        self, lease: Lease, *, message: UIMessage, step_index: int
    ) -> None:
        check_part_types(message["parts"], what=f"message {message['id']}")  # MF-045
        with self._lock:
            run = self._fenced(lease)
            stored = self._step_message(run.id, step_index)
            self._check_openable(run.thread_id, message, stored)  # MF-043
            if stored is None:
                self._append(
                    MemoryMessage(
                        message=copy.deepcopy(message),
                        thread_id=run.thread_id,
                        run_id=run.id,
                        position=0,
                        step_index=step_index,
                        status="open",
                    )
                )
            else:
                stored.message = copy.deepcopy(message)

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
        replace_open: bool = False,
    ) -> None:
        check_part_types(message["parts"], what=f"message {message['id']}")  # MF-045
        with self._lock:
            run = self._fenced(lease)
            stored = self._step_message(run.id, step.index)
            if stored is not None and stored.status != "open":
                raise ValueError(f"run {run.id} already has a message for step {step.index}")
            if stored is not None:
                stored.message, stored.status = copy.deepcopy(message), "committed"
            else:
                stored = MemoryMessage(
                    message=copy.deepcopy(message),
                    thread_id=run.thread_id,
                    run_id=run.id,
                    position=0,
                    step_index=step.index,
                )
                self._append(stored)
            # MF-002: the step's own usage and diagnostics, on its message.
            stored.usage, stored.diagnostics = dict(step.usage), step_diagnostics(step)
            self.steps.setdefault(run.id, []).append(step)
            run.step_count = step.index + 1
            if outcome is not None:
                self._end(run, outcome)

    async def update_message(
        self, lease: Lease, *, message: UIMessage, outcome: RunOutcome | None = None
    ) -> None:
        with self._lock:
            run = self._fenced(lease)
            self._replace(run.id, message)
            if outcome is not None:
                self._end(run, outcome)

    async def suspend(
        self,
        lease: Lease,
        *,
        message: UIMessage,
        actions: Sequence[ActionRequest],
        usage: Usage,
    ) -> None:
        with self._lock:
            run = self._fenced(lease)
            self._replace(run.id, message)
            for action in actions:
                earlier = self.actions.get((run.id, action.tool_call_id))
                if earlier is not None:
                    self.past_actions.setdefault((run.id, action.tool_call_id), []).append(earlier)
                self.actions[(run.id, action.tool_call_id)] = {
                    "id": new_id("act"),
                    "request": action,
                    "message_id": message["id"],
                    "status": "pending",
                    "created_at": datetime.now(UTC),
                }
            self._end(run, RunOutcome(status="waiting", usage=usage))

    async def begin_actions(self, lease: Lease, *, tool_call_ids: Sequence[str]) -> None:
        with self._lock:
            run = self._fenced(lease)
            for call_id in tool_call_ids:
                if self.actions[(run.id, call_id)]["status"] == "submitted":
                    self.actions[(run.id, call_id)]["status"] = "executing"

    def answer(self, run_id: str, tool_call_id: str, answer: Any) -> None:
        """Trusted test helper: answer a declared (input) suspension, already validated,
        and queue the run's resume episode."""
        with self._lock:
            action = self.actions[(run_id, tool_call_id)]
            if action["status"] != "pending" or action["request"].kind != "input":
                raise ValueError("no pending input suspension for this call")
            action.update(
                status="submitted", response={"answer": answer}, resolved_at=datetime.now(UTC)
            )
            self.runs[run_id].status = "queued"

    def respond(self, run_id: str, tool_call_id: str, *, approved: bool, reason: str = "") -> None:
        """Trusted test helper: answer an approval and queue the run's resume episode."""
        with self._lock:
            action = self.actions[(run_id, tool_call_id)]
            if action["status"] != "pending":
                raise ValueError("action already answered")
            action["status"] = "submitted"
            action["response"] = {"approved": approved, **({"reason": reason} if reason else {})}
            action["resolved_at"] = datetime.now(UTC)
            for stored in self.messages:
                if stored.run_id != run_id:
                    continue
                for part in stored.message["parts"]:
                    if part.get("toolCallId") == tool_call_id and "approval" in part:
                        part["state"] = "approval-responded"
                        part["approval"] = {**part["approval"], "approved": approved}
                        if reason:
                            part["approval"]["reason"] = reason
            self.runs[run_id].status = "queued"

    def submit_result(
        self, run_id: str, tool_call_id: str, *, output: Any = None, error_text: str | None = None
    ) -> None:
        """Trusted test helper: a client tool's result lands in its part, the run resumes."""
        with self._lock:
            action = self.actions[(run_id, tool_call_id)]
            if action["status"] != "pending":
                raise ValueError("action already answered")
            response = {"output": output} if error_text is None else {"errorText": error_text}
            action.update(status="submitted", response=response, resolved_at=datetime.now(UTC))
            for stored in self.messages:
                for part in stored.message["parts"] if stored.run_id == run_id else ():
                    if part.get("toolCallId") == tool_call_id:
                        part.update(toolMetadata={"pai": {"source": "client"}}, **_result(response))
            self.runs[run_id].status = "queued"

    async def suspend_history(
        self, lease: Lease, *, tool_call_ids: Collection[str]
    ) -> dict[str, list[SuspensionEpisode]]:
        """The run's suspension episodes of these calls (one per pending action here)."""
        with self._lock:
            found: dict[str, list[SuspensionEpisode]] = {}
            for (run_id, call_id), action in self.actions.items():
                if run_id == lease.run_id and call_id in tool_call_ids:
                    past = self.past_actions.get((run_id, call_id), [])
                    found[call_id] = [_episode(a) for a in [*past, action]]
            return found

    def request_cancel(self, run_id: str) -> None:
        with self._lock:
            self.runs[run_id].cancel_requested = True

    async def take_steering(self, lease: Lease) -> list[UIMessage]:
        with self._lock:
            run = self._fenced(lease)
            taken = self.steering.pop(run.thread_id, [])
            for message in taken:
                self._append(
                    MemoryMessage(
                        message=copy.deepcopy(message),
                        thread_id=run.thread_id,
                        run_id=run.id,
                        position=0,
                    )
                )
            return copy.deepcopy(taken)

    async def finish_run(
        self, lease: Lease, outcome: RunOutcome, *, discard_open_step: int | None = None
    ) -> None:
        with self._lock:
            run = self._fenced(lease)
            if discard_open_step is not None:
                self.messages = [
                    m
                    for m in self.messages
                    if not (
                        m.run_id == run.id
                        and m.step_index == discard_open_step
                        and m.status == "open"
                    )
                ]
            self._end(run, outcome)

    # -- the lifecycle facade (pai_agents.engine.hooks.LifecycleStore) --

    @property
    def lifecycle(self) -> EngineLifecycleBackend:
        """The facade backend over this store's rows (created on first use)."""
        backend = self.__dict__.get("_lifecycle")
        if backend is None:
            backend = self.__dict__["_lifecycle"] = EngineLifecycleBackend(self)
        return backend

    def lifecycle_thread(self, lease: Lease, *, resolver: bool = False, schemas: Any = None) -> Any:
        return self.lifecycle.facade_for(lease, resolver=resolver, schemas=schemas)

    def lifecycle_run_metadata(self, lease: Lease, *, schemas: Any = None) -> tuple[Any, Any]:
        return self.lifecycle.run_clients(lease, schemas=schemas)

    def append_lifecycle_message(
        self, thread_id: str, message: UIMessage, *, context: bool
    ) -> None:
        """Store a message a lifecycle hook appended (no run; see ``EngineLifecycleBackend``).

        MF-043: a hook may append while a step streams into the open tail message; the open
        message then moves behind the appended one, so it stays the thread's tail and the
        next checkpoint streams on (LC-011, LC-032: the append is not refused either)."""
        with self._lock:
            open_tail = next(
                (m for m in self.messages if m.thread_id == thread_id and m.status == "open"),
                None,
            )
            self._append(
                MemoryMessage(
                    message=message, thread_id=thread_id, run_id=None, position=0, context=context
                )
            )
            if open_tail is not None:
                self.messages.remove(open_tail)
                self._append(open_tail)

    # -- internals --

    def _check_openable(
        self, thread_id: str, message: UIMessage, stored: MemoryMessage | None
    ) -> None:
        """MF-043: the open message is the thread's only one and its tail assistant message."""
        thread = [m for m in self.messages if m.thread_id == thread_id]
        if stored is None:
            ok = message["role"] == "assistant" and not any(m.status == "open" for m in thread)
        else:
            ok = stored.status == "open" and thread[-1] is stored
        if not ok:
            raise OpenMessageConflict(
                f"message {message['id']} cannot be open: another message of the thread is "
                "open, or it is not the thread's tail (MF-043)"
            )

    def _step_message(self, run_id: str, step_index: int) -> MemoryMessage | None:
        return next(
            (m for m in self.messages if m.run_id == run_id and m.step_index == step_index), None
        )

    def _replace(self, run_id: str, message: UIMessage) -> None:
        for stored in self.messages:
            if stored.run_id == run_id and stored.message["id"] == message["id"]:
                stored.message = copy.deepcopy(message)
                return
        raise LookupError(f"run {run_id} has no message {message['id']}")

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


def _result(response: dict[str, Any]) -> dict[str, Any]:
    if "errorText" in response:
        return {"state": "output-error", "errorText": response["errorText"]}
    return {"state": "output-available", "output": response["output"]}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None


def _episode(action: dict[str, Any]) -> SuspensionEpisode:
    request: ActionRequest = action["request"]
    return SuspensionEpisode(
        action_id=str(action.get("id", "")),
        kind=request.kind,
        status=action["status"],
        payload=copy.deepcopy(request.input),
        resolution=copy.deepcopy(action.get("response")),
        approval_id=request.approval_id,
        suspended_at=_iso(action.get("created_at")),
        resolved_at=_iso(action.get("resolved_at")),
        name=request.suspension or request.kind,
        answer_schema=copy.deepcopy(request.answer_schema),
    )
