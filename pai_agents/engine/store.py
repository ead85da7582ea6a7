"""The store protocol the engine writes through, and the values it exchanges.

Every method that writes takes the execution's :class:`Lease`; an implementation must make
the write conditional on the lease's fencing token (one conditional UPDATE in the same
transaction) and raise :class:`LeaseLost` when it no longer holds, writing nothing. That is
what keeps a paused or partitioned worker from ever touching a run another worker took over.

Commit budget for a two-step run with one tool call (see docs/benchmarks.md): claim,
``commit_step`` (the call is recorded before the tool runs), ``update_message`` (the tool
result), ``commit_step`` with the outcome (final answer and completion in one transaction).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, TypeAlias

from pai_agents.messages.types import UIMessage
from pai_agents.models.base import Usage

__all__ = [
    "ActionRequest",
    "ClaimedRun",
    "Lease",
    "LeaseLost",
    "OpenMessageConflict",
    "RunNotFound",
    "RunOutcome",
    "RunSignals",
    "RunStatus",
    "StepRecord",
    "ThreadStore",
    "step_diagnostics",
]

RunStatus: TypeAlias = Literal[
    "queued", "running", "waiting", "completed", "failed", "cancelled", "blocked"
]
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled", "blocked"})


class LeaseLost(RuntimeError):
    """The execution's lease expired or was taken over; nothing was written."""


class OpenMessageConflict(RuntimeError):
    """MF-043: only the thread's tail assistant message may be open; a checkpoint that would
    open another message, or stream into one that is not the tail, writes nothing."""


class RunNotFound(LookupError):
    """No such run (or not claimable: finished, or leased by a live worker)."""


@dataclass(frozen=True, kw_only=True)
class Lease:
    """Proof of ownership of one run execution; the token fences every write."""

    run_id: str
    owner: str
    token: int
    thread_id: str
    scope_key: str


@dataclass(frozen=True, kw_only=True)
class ClaimedRun:
    """A run as its claiming worker sees it: enough to execute without another read."""

    lease: Lease
    thread_id: str
    agent_name: str
    scope_key: str
    identity: Mapping[str, Any]
    client_data: Mapping[str, Any]
    initiator: str
    step_count: int
    attempt: int
    usage: Usage = field(default_factory=lambda: Usage())
    # The run's latest assistant message when it already has steps (resume, recovery), and
    # whether a dead attempt left it open (a step to repeat under the same message id).
    last_message: UIMessage | None = None
    last_message_open: bool = False
    # Tool calls whose approved execution had started (a crash there must not re-run them).
    executing_tool_calls: frozenset[str] = frozenset()
    # The logical run's start: stored by the run's first claim and unchanged by every later
    # one (resume, recovery), so hooks see one ``run.started_at`` per run (LC-007).
    started_at: datetime | None = None
    # A cancel was requested before this claim (a waiting run whose agent has tool hooks is
    # cancelled by an episode that settles its calls through after_tool_result, LC-137).
    cancel_requested: bool = False


@dataclass(frozen=True, kw_only=True)
class StepRecord:
    """One model step, for inspection: what was asked, what it cost, how it ended."""

    index: int
    message_id: str
    request: Mapping[str, Any]
    usage: Usage
    finish_reason: str
    started_at: datetime
    finished_at: datetime


def step_diagnostics(step: StepRecord) -> dict[str, Any]:
    """The step message's ``metadata.pai.diagnostics`` (MF-002): how this one step ended and
    which model produced it, from the step's own record (never folded per run)."""
    request = step.request
    diagnostics: dict[str, Any] = {"finishReason": step.finish_reason}
    # rawFinishReason: the provider's word; retries: transient faults retried (model_retry);
    # toolCallsRefused: calls not executed (a length-cut step, over the per-step bound).
    for key in ("provider", "modelId", "durationMs", "rawFinishReason", "retries"):
        if key in request:
            diagnostics[key] = request[key]
    if request.get("toolCallsRefused"):
        diagnostics["toolCallsRefused"] = request["toolCallsRefused"]
    for flag in ("synthetic", "aborted", "failed", "maxStepsReached"):
        if request.get(flag) is True:
            diagnostics[flag] = True
    return diagnostics


@dataclass(frozen=True, kw_only=True)
class RunSignals:
    """What a heartbeat learns about its run besides keeping the lease."""

    cancel_requested: bool = False


@dataclass(frozen=True, kw_only=True)
class ActionRequest:
    """A tool call that waits for a person (approval), a client (client tool), or a
    person's typed answer (``input``: a declared suspension, docs/suspensions.md).

    ``input`` is what the answerer is shown (the call's input; an input suspension's
    payload). ``sequence`` numbers the call's episodes (0 first): a call may suspend again
    after each answer."""

    tool_call_id: str
    tool_name: str
    kind: Literal["approval", "client", "input", "subagent"]
    input: Any
    approval_id: str | None = None
    suspension: str | None = None
    answer_schema: Mapping[str, Any] | None = None
    sequence: int = 0


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """How an execution episode ended. ``error`` is private (operators only)."""

    status: RunStatus
    error: Mapping[str, Any] | None = None
    usage: Usage = field(default_factory=lambda: Usage())


class ThreadStore(Protocol):
    """What the engine needs from persistence. Implementations: ORM (product), in-memory."""

    async def claim_run(self, run_id: str, *, owner: str, lease_seconds: float) -> ClaimedRun:
        """Take the run's lease (queued, or running with an expired lease); else RunNotFound."""
        ...

    async def heartbeat(self, lease: Lease, *, lease_seconds: float) -> RunSignals:
        """Extend the lease and report cancellation; raise LeaseLost if it is no longer ours."""
        ...

    async def checkpoint_message(
        self, lease: Lease, *, message: UIMessage, step_index: int
    ) -> None:
        """Store the step's message as ``open`` so a crash can settle to this checkpoint."""
        ...

    async def load_context(self, lease: Lease) -> list[UIMessage]:
        """The context-visible, committed messages of the run's thread, oldest first."""
        ...

    async def commit_step(
        self,
        lease: Lease,
        *,
        message: UIMessage,
        step: StepRecord,
        outcome: RunOutcome | None = None,
        replace_open: bool = False,
    ) -> None:
        """Store one step's assistant message (replacing its open checkpoint) and Step row;
        with ``outcome``, end the run in the same transaction."""
        ...

    async def update_message(
        self, lease: Lease, *, message: UIMessage, outcome: RunOutcome | None = None
    ) -> None:
        """Replace the parts of a message this run committed (tool results)."""
        ...

    async def suspend(
        self, lease: Lease, *, message: UIMessage, actions: Sequence[ActionRequest], usage: Usage
    ) -> None:
        """Store the message and its pending actions; the run waits and releases its lease."""
        ...

    async def begin_actions(self, lease: Lease, *, tool_call_ids: Sequence[str]) -> None:
        """Mark approved actions as executing (durably, before they run: at most once)."""
        ...

    async def take_steering(self, lease: Lease) -> list[UIMessage]:
        """Admit the thread's queued ``steer`` input into this run, before a model step.

        The items at the head of the thread's queue with policy ``steer`` (in order of
        acceptance, stopping at the first item of another policy, which must run first)
        become user messages of this run, in transcript and context; their queue items are
        marked admitted in the same fenced transaction. Returns them (usually none).
        """
        ...

    async def finish_run(
        self, lease: Lease, outcome: RunOutcome, *, discard_open_step: int | None = None
    ) -> None:
        """End the run with ``outcome`` and release the lease. ``discard_open_step``: delete
        that step's open checkpoint in the same transaction (a policy abort drops the
        partial step, LC-116)."""
        ...
