"""Starting sub-agent runs: inside the parent's suspending transaction, so the pending
action, the child's thread, its user message and its queued run exist together or not at
all (a worker killed mid-commit leaves neither a call without a child nor a child without
a call)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.utils import timezone

from pai_agents.agent import InvalidAgentInput
from pai_agents.engine.store import ActionRequest, Lease
from pai_agents.ids import new_id
from pai_threads.conf import pai_settings
from pai_threads.execution import registry
from pai_threads.models import Message, PendingAction, Run, Thread
from pai_threads.store.admission import dispatch_after_commit, resume_if_answered
from pai_threads.store.rewrites import run_metadata_defaults, thread_metadata_defaults
from pai_threads.subagents.progress import progress_value, write_progress

__all__ = ["start_children", "subagent_depth"]


def max_depth() -> int:
    return int(pai_settings.SUBAGENT_MAX_DEPTH)


def subagent_depth(run: Run, limit: int) -> int:
    """How many parent runs are above ``run`` (0 for a run a person started), counting no
    further than ``limit``: one read per level above it."""
    depth, parent = 0, run.parent_run_id
    while parent and depth <= limit:
        depth += 1
        parent = Run.objects.filter(pk=parent).values_list("parent_run_id", flat=True).first()
    return depth


def start_children(lease: Lease, actions: Sequence[ActionRequest]) -> None:
    """For each sub-agent call among ``actions`` (whose pending actions this transaction
    just wrote), the child's thread, user message and queued run, dispatched after commit.
    A call that cannot start (depth limit, unknown agent, identity the child rejects) is
    answered at once with a model-visible failure, and the parent resumes."""
    calls = [a for a in actions if a.kind == PendingAction.Kind.SUBAGENT]
    if not calls:
        return
    parent = Run.objects.only("id", "identity", "scope_key", "parent_run_id").get(pk=lease.run_id)
    limit = max_depth()
    too_deep = subagent_depth(parent, limit) + 1 > limit
    refused = False
    for call in calls:
        payload: Mapping[str, Any] = call.input if isinstance(call.input, Mapping) else {}
        error = (
            f"the sub-agent depth limit ({limit}) is reached"
            if too_deep
            else _start(parent, call.tool_call_id, payload)
        )
        if error is not None:
            refused = True
            _refuse(parent, call, error)
    if refused:
        resume_if_answered(parent.id)


def _start(parent: Run, tool_call_id: str, payload: Mapping[str, Any]) -> str | None:
    """Create the child; the reason it cannot start, else None."""
    name = str(payload.get("agent") or "")
    try:
        agent = registry.get_agent(name)
    except registry.AgentNotFound:
        return f"agent {name!r} is not available"
    try:
        identity = agent.validate_identity(dict(parent.identity))
    except InvalidAgentInput:
        return f"agent {name!r} does not accept this caller's identity"
    task = str(payload.get("task") or "")
    hidden = payload.get("thread", "hidden") != "own"
    thread = Thread.objects.create(
        scope_key=parent.scope_key,
        agent_name=name,
        title=" ".join(task.split())[:80],
        parent_run=parent if hidden else None,
        **thread_metadata_defaults(agent),
    )
    run = Run.objects.create(
        thread=thread,
        scope_key=parent.scope_key,
        agent_name=name,
        initiator=Run.Initiator.SUBAGENT,
        identity=identity,
        client_data={},  # the parent's client data never reaches the child
        parent_run=parent,
        parent_tool_call_id=tool_call_id,
        **run_metadata_defaults(agent),
    )
    Message.objects.create(
        message_id=new_id("msg"),
        thread=thread,
        scope_key=parent.scope_key,
        run=run,
        role="user",
        parts=[{"type": "text", "text": task}],
        metadata={},
        producer=Message.Producer.SEND,
        relation=Message.Relation.INPUT,
    )
    # The child's ids on the parent's tool part at once (the engine's announcement of the
    # suspended message reads the row after this transaction).
    write_progress(parent.id, tool_call_id, progress_value(run), lock_parent=False, announce=False)
    dispatch_after_commit(run.id)
    return None


def _refuse(parent: Run, call: ActionRequest, error: str) -> None:
    PendingAction.objects.filter(
        run_id=parent.id, tool_call_id=call.tool_call_id, status=PendingAction.Status.PENDING
    ).update(
        status=PendingAction.Status.SUBMITTED,
        response={"answer": {"status": "failed", "error": error}},
        submitted_by={"runtime": "subagent"},
        resolved_at=timezone.now(),
    )
