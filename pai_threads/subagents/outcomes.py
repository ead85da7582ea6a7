"""Answering a sub-agent call: in the transaction that ends the child run.

The child's end and the parent's answered action commit together, so a crash can neither
lose the answer nor give it twice; the parent is queued again once nothing else of it
waits. A parent that stopped waiting meanwhile (cancelled) has no pending action left, and
the child's end changes nothing of it.
"""

from __future__ import annotations

from functools import partial
from typing import Any, cast

from django.utils import timezone

from pai_agents.json import ensure_strict_json
from pai_agents.models.base import Usage, add_usage
from pai_agents.subagents import SubagentOutcome
from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import action_answered
from pai_threads.models import Message, PendingAction, Run
from pai_threads.store.admission import resume_if_answered
from pai_threads.subagents.progress import glimpse, progress_value, write_progress

__all__ = ["answer_parent", "child_outcome"]

_ERRORS: dict[str, str] = {
    Run.Status.FAILED: "the sub-agent's run failed",
    Run.Status.BLOCKED: "the sub-agent's run was blocked",
}


def child_outcome(child: Run) -> dict[str, Any]:
    """What the parent's call gets, as a :class:`~pai_agents.subagents.SubagentOutcome`: the
    status, the child's final assistant text, where to
    read the whole transcript, and the child's usage. Private error details stay on the
    child run (operators see them there)."""
    completed = child.status == Run.Status.COMPLETED
    outcome = SubagentOutcome(
        status=child.status,
        thread_id=child.thread_id,
        run_id=child.id,
        usage=dict(child.usage or {}),
        text=_final_text(child.id) if completed else "",
        error=_ERRORS.get(child.status, ""),
    )
    return outcome.model_dump(mode="json")


def _final_text(run_id: str) -> str:
    """The text of the child's last assistant message that has any."""
    rows = (
        Message.objects.filter(run_id=run_id, role="assistant")
        .exclude(status=Message.Status.OPEN)
        .order_by("-created_at", "-id")
        .values_list("parts", flat=True)
    )
    for parts in rows:
        text = "".join(
            str(p.get("text") or "") for p in parts or () if p.get("type") == "text"
        ).strip()
        if text:
            return text
    return ""


def answer_parent(child_run_id: str) -> bool:
    """Inside the transaction that ended ``child_run_id``: answer its parent's pending
    sub-agent action with the child's outcome and resume the parent when nothing else of it
    waits. True when an action was answered."""
    child = Run.objects.filter(pk=child_run_id).first()
    if child is None or not child.parent_run_id:
        return False
    # The parent's run row before its action: the order the submit path takes them in.
    parent_usage = (
        Run.objects.select_for_update()
        .filter(pk=child.parent_run_id)
        .values_list("usage", flat=True)
        .first()
    )
    action = (
        PendingAction.objects.select_for_update()
        .filter(
            run_id=child.parent_run_id,
            tool_call_id=child.parent_tool_call_id,
            kind=PendingAction.Kind.SUBAGENT,
            status=PendingAction.Status.PENDING,
        )
        .first()
    )
    if action is None:
        return False
    outcome = child_outcome(child)
    final = progress_value(child, text=glimpse(outcome["text"]))
    write_progress(
        child.parent_run_id,
        action.tool_call_id,
        final,
        lock_parent=False,
        announce=False,
        message_id=action.message_id,
    )
    action.status = PendingAction.Status.SUBMITTED
    action.response = ensure_strict_json({"answer": outcome}, what="sub-agent outcome")
    action.submitted_by = {"runtime": "subagent", "runId": child.id}
    action.resolved_at = timezone.now()
    action.save(update_fields=["status", "response", "submitted_by", "resolved_at"])
    # Usage rolls up: the parent's run counts what its children spent (their own children
    # included), and the resumed parent carries it on from its run row.
    if child.usage:
        total = add_usage(cast(Usage, parent_usage or {}), cast(Usage, child.usage))
        Run.objects.filter(pk=child.parent_run_id).update(usage=total)
    publish_after_commit(action.thread_id, partial(action_answered, action))
    resume_if_answered(action.run_id)
    return True
