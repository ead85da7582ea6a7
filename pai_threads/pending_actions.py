"""The pending-action sidecar of one tool part (MF-024).

Commands are never serialized into messages: a renderer holding a message and one of its tool
parts asks for the action of exactly that pair and gets a typed view whose ``submit()``
answers it. Approvals and unresolved client tools are both pending actions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast

from pai_threads.errors import NotFound
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Thread

__all__ = ["PendingActionView", "answered_message", "get_pending_action"]


@dataclass(frozen=True, kw_only=True)
class PendingActionView:
    """The pending action of one (message, tool part) pair, bound to the caller's identity."""

    id: str
    thread_id: str
    run_id: str
    message_id: str
    tool_call_id: str
    tool_name: str
    kind: Literal["approval", "client"]
    input: Any
    approval_id: str | None
    created_at: datetime
    identity: Identity = field(repr=False, compare=False)

    def submit(self, response: Mapping[str, Any], *, dispatch: bool = True) -> PendingAction:
        """Answer it (``{"approved", "reason"?}``, or ``{"output"}`` / ``{"errorText"}``) as
        :func:`pai_threads.services.submit_action` does: once only, scoped to the identity."""
        from pai_threads import services  # services re-exports this module

        return services.submit_action(self.identity, self.id, response, dispatch=dispatch)


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
    )


def answered_message(action: PendingAction) -> Message | None:
    """The message holding an answered action's tool part, to announce after the answer:
    the part changed (approval responded, client result) and so did its episode."""
    return Message.objects.filter(thread_id=action.thread_id, message_id=action.message_id).first()
