"""Pending actions: answering one (an approval, a client tool's result, the typed answer to
a suspension the tool declared) and reading them.

Commands are never serialized into messages: a renderer holding a message and one of its
tool parts asks for the action of exactly that pair (:func:`get_pending_action`, MF-024)
and gets a typed view whose ``submit()`` answers it. Approvals and unresolved client tools
are both pending actions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, Literal, cast

from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel, ValidationError

from pai_agents.engine.tool_calls import error_chunk
from pai_agents.json import NotStrictJson, ensure_strict_json
from pai_threads.conf import pai_settings
from pai_threads.errors import ActionConflict, InvalidInput, NotFound
from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import action_answered
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Run, Thread
from pai_threads.services.input_guard import check_json, lookup_id
from pai_threads.services.threads import get_thread
from pai_threads.store.admission import resume_if_answered
from pai_threads.store.rows import fold_chunks

__all__ = [
    "AnswerInvalid",
    "PendingActionView",
    "answered_message",
    "fulfil_action",
    "get_pending_action",
    "list_actions",
    "submit_action",
]


def submit_action(
    identity: Identity, action_id: str, response: Mapping[str, Any], *, dispatch: bool = True
) -> PendingAction:
    """Answer a pending action once: approve/deny a call, give a client tool's result, or
    answer a declared suspension (``{"answer": ...}``; :class:`AnswerInvalid` when it does
    not match the declared model, and the action stays pending).

    The action is bound to its run, tool call and input: the answer applies to exactly that
    call. When the run has no other pending action it resumes (dispatched after commit).
    """
    actions = PendingAction.objects.filter(
        id=lookup_id(action_id, "pending action"), scope_key=identity.scope_key
    )
    submitted_by = {"scopeKey": identity.scope_key, **dict(identity.data)}
    return _submit(actions, action_id, response, submitted_by, "client", dispatch=dispatch)


def fulfil_action(
    action_id: str, response: Mapping[str, Any], *, by: str, dispatch: bool = True
) -> PendingAction:
    """Trusted server code answers a pending action (any scope): a manual fulfilment.

    Same rules as :func:`submit_action` (accepted once, bound to its call); the result is
    tagged ``toolMetadata.pai.source == "manual"`` and ``by`` is recorded as the submitter.
    """
    actions = PendingAction.objects.filter(id=lookup_id(action_id, "pending action"))
    return _submit(actions, action_id, response, {"manual": by}, "manual", dispatch=dispatch)


def _submit(
    actions: Any,
    action_id: str,
    response: Mapping[str, Any],
    submitted_by: dict[str, Any],
    source: str,
    *,
    dispatch: bool,
) -> PendingAction:
    response = check_json(response, "the answer")
    run_id = actions.values_list("run_id", flat=True).first()
    if run_id is None:
        raise NotFound("pending action not found")
    with transaction.atomic():
        # The run before the action: the order cancel_run takes them in (no deadlock).
        Run.objects.select_for_update().filter(pk=run_id).values_list("pk").first()
        action = PendingAction.objects.select_for_update().filter(id=action_id).first()
        if action is None:
            raise NotFound("pending action not found")  # its thread was deleted meanwhile
        if action.status != PendingAction.Status.PENDING:
            raise ActionConflict("this action was already answered or cancelled")
        if action.kind == PendingAction.Kind.SUBAGENT:
            # Only the child run's end answers it (docs/subagents.md): no one forges it.
            raise ActionConflict("a sub-agent call is answered by its child run, not submitted")
        if action.kind == PendingAction.Kind.INPUT:
            # The tool part stays input-available: the episode holds the answer until the
            # call re-enters execute (docs/suspensions.md).
            response = _input_answer(action, response)
        else:
            chunk = _answer_chunk(action, response, source)
            row = Message.objects.get(run_id=action.run_id, message_id=action.message_id)
            fold_chunks(row, [chunk])
        action.status = PendingAction.Status.SUBMITTED
        action.response = ensure_strict_json(dict(response), what="response")
        action.submitted_by = submitted_by
        action.resolved_at = timezone.now()
        action.save(update_fields=["status", "response", "submitted_by", "resolved_at"])
        # The answered message first: its tool part's episode now has the resolution
        # (MF-023); then the run's status, the queue and the actions.
        publish_after_commit(action.thread_id, partial(action_answered, action))
        resume_if_answered(action.run_id, dispatch=dispatch)
    return action


class AnswerInvalid(InvalidInput):
    """An input suspension's answer does not match the model the tool declared;
    ``details.errors`` lists each field. Nothing changed: the action is still pending."""

    code = "invalid_answer"

    def __init__(self, message: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.details = {"errors": errors}


def _input_answer(action: PendingAction, response: Mapping[str, Any]) -> dict[str, Any]:
    """The answer validated against the declared model, normalized (its JSON dump)."""
    if set(response) != {"answer"}:
        raise InvalidInput("an input suspension needs {'answer': <the answer>} and nothing else")
    name = str((action.request or {}).get("suspension") or "")
    model = _answer_model(action, name)
    try:
        parsed = model.model_validate(response["answer"])
    except ValidationError as exc:
        errors = [
            {"loc": [str(p) for p in e["loc"]], "msg": str(e["msg"]), "type": str(e["type"])}
            for e in exc.errors()
        ]
        raise AnswerInvalid(f"the answer does not match suspension {name!r}", errors) from exc
    return {"answer": parsed.model_dump(mode="json")}


def _answer_model(action: PendingAction, name: str) -> type[BaseModel]:
    """The answer model the run's agent declares for this suspension, now."""
    agent_name = Run.objects.filter(pk=action.run_id).values_list("agent_name", flat=True).get()
    try:
        tool = registry.get_agent(agent_name).tools.get(action.tool_name)
    except registry.AgentNotFound:
        tool = None
    model = tool.suspends.get(name) if tool is not None else None
    if model is None:
        raise ActionConflict(f"tool {action.tool_name} no longer declares suspension {name!r}")
    return model


def _answer_chunk(
    action: PendingAction, response: Mapping[str, Any], source: str
) -> dict[str, Any]:
    if action.kind == PendingAction.Kind.APPROVAL:
        approved = response.get("approved")
        reason = response.get("reason")
        if not isinstance(approved, bool) or (reason is not None and not isinstance(reason, str)):
            raise InvalidInput("an approval needs {'approved': true|false, 'reason'?: string}")
        chunk: dict[str, Any] = {
            "type": "tool-approval-response",
            "approvalId": action.request.get("approvalId", action.id),
            "approved": approved,
        }
        if reason:
            chunk["reason"] = reason[:2000]
        return chunk
    if "errorText" in response:
        if not isinstance(response["errorText"], str):
            raise InvalidInput("errorText must be a string")
        return error_chunk(action.tool_call_id, response["errorText"], source)  # type: ignore[arg-type]
    if "output" not in response:
        raise InvalidInput("a client tool result needs 'output' (or 'errorText')")
    try:
        output = ensure_strict_json(response["output"], what="output")
    except NotStrictJson as exc:
        raise InvalidInput(str(exc)) from exc
    return {
        "type": "tool-output-available",
        "toolCallId": action.tool_call_id,
        "output": output,
        "toolMetadata": {"pai": {"source": source}},
    }


def list_actions(
    identity: Identity, *, thread_id: str | None = None, status: str = "pending"
) -> list[PendingAction]:
    actions = PendingAction.objects.filter(scope_key=identity.scope_key, status=status)
    if thread_id is not None:
        actions = actions.filter(thread_id=get_thread(identity, thread_id).id)
    return list(actions.order_by("created_at", "id")[: pai_settings.MAX_PAGE_SIZE])


@dataclass(frozen=True, kw_only=True)
class PendingActionView:
    """The pending action of one (message, tool part) pair, bound to the caller's identity."""

    id: str
    thread_id: str
    run_id: str
    message_id: str
    tool_call_id: str
    tool_name: str
    kind: Literal["approval", "client", "input", "subagent"]
    input: Any
    approval_id: str | None
    created_at: datetime
    identity: Identity = field(repr=False, compare=False)
    # An input suspension's name and the JSON schema of its answer (None otherwise).
    suspension: str | None = None
    answer_schema: Mapping[str, Any] | None = None

    def submit(self, response: Mapping[str, Any], *, dispatch: bool = True) -> PendingAction:
        """Answer it (``{"approved", "reason"?}``, ``{"output"}`` / ``{"errorText"}``, or
        ``{"answer"}``) as :func:`submit_action` does: once only, scoped to the identity."""
        return submit_action(self.identity, self.id, response, dispatch=dispatch)


def _key(value: str | Mapping[str, Any], field_name: str) -> str:
    key = value if isinstance(value, str) else value.get(field_name)
    if not isinstance(key, str) or not key:
        raise TypeError(f"expected an id or a mapping with a string {field_name!r}")
    return key


def get_pending_action(
    identity: Identity,
    thread_id: str,
    message: str | Mapping[str, Any],
    part: str | Mapping[str, Any],
) -> PendingActionView | None:
    """The pending action of exactly this message and tool part, or None (MF-024).

    ``message`` is a message id or a projected message, ``part`` a tool call id or a tool
    part. Another scope's thread raises ``NotFound`` like a missing one; an action of the
    same call id under another message does not match.
    """
    message_id, tool_call_id = _key(message, "id"), _key(part, "toolCallId")
    if not Thread.objects.filter(id=thread_id, scope_key=identity.scope_key).exists():
        raise NotFound("thread not found")
    action = (
        PendingAction.objects.filter(
            thread_id=thread_id,
            scope_key=identity.scope_key,
            message_id=message_id,
            tool_call_id=tool_call_id,
            status=PendingAction.Status.PENDING,
        )
        .order_by("-created_at", "-id")
        .first()
    )
    if action is None:
        return None
    return PendingActionView(
        id=action.id,
        thread_id=action.thread_id,
        run_id=action.run_id,
        message_id=action.message_id,
        tool_call_id=action.tool_call_id,
        tool_name=action.tool_name,
        kind=cast(Any, action.kind),
        input=action.input,
        approval_id=(action.request or {}).get("approvalId"),
        created_at=action.created_at,
        identity=identity,
        suspension=(action.request or {}).get("suspension"),
        answer_schema=(action.request or {}).get("schema"),
    )


def answered_message(action: PendingAction) -> Message | None:
    """The message holding an answered action's tool part, to announce after the answer:
    the part changed (approval responded, client result) and so did its episode."""
    return Message.objects.filter(thread_id=action.thread_id, message_id=action.message_id).first()
