"""Client projections of stored rows. Private fields never leave through here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pai_agents.messages.projection import client_message
from pai_threads.models import Message, PendingAction, QueueItem, Run, Thread
from pai_threads.suspensions import join_suspensions

__all__ = ["action_out", "message_out", "messages_out", "queue_item_out", "run_out", "thread_out"]

_CLIENT_ERROR = {"code": "run_failed", "message": "The run failed. Operators can see the details."}


def thread_out(thread: Thread) -> dict[str, Any]:
    return {
        "id": thread.id,
        "agent": thread.agent_name,
        "title": thread.title,
        "title_source": thread.title_source,
        "archived": thread.archived,
        "metadata": thread.metadata,
        "created_at": thread.created_at,
        "updated_at": thread.updated_at,
    }


def run_out(run: Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "thread_id": run.thread_id,
        "status": run.status,
        "initiator": run.initiator,
        "step_count": run.step_count,
        "attempt": run.attempt,
        "usage": run.usage,
        "metadata": run.metadata,
        # The stored error is private (stack details, provider messages): clients get a code.
        "error": _CLIENT_ERROR if run.status == Run.Status.FAILED else None,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


def message_out(message: Message) -> dict[str, Any]:
    return messages_out([message])[0]


def messages_out(rows: Sequence[Message], *, suspensions: bool = True) -> list[dict[str, Any]]:
    """Messages of one thread as clients see them: stored parts stay native, and each
    projection joined onto tool parts costs at most one query per page, never one per
    part (MF-012). ``suspensions=False``: the caller knows no suspension episode names
    these messages (nothing to join, no query)."""
    messages = [client_message(row.to_ui_message()) for row in rows]  # MF-011
    if messages and suspensions:
        join_suspensions(rows[0].thread_id, messages)  # MF-023
    return messages


def queue_item_out(item: QueueItem) -> dict[str, Any]:
    message = item.message
    return {
        "id": item.id,
        "policy": item.policy,
        "status": item.status,
        # The same projected user-message shape the transcript will hold after admission.
        "messages": [
            {
                "id": item.message_id,
                "role": "user",
                "metadata": {
                    **(message.get("metadata") or {}),
                    "pai": {"producer": "send", "status": "pending"},
                },
                "parts": client_message(message)["parts"],
            }
        ],
        "created_at": item.created_at,
    }


def action_out(action: PendingAction) -> dict[str, Any]:
    return {
        "id": action.id,
        "thread_id": action.thread_id,
        "run_id": action.run_id,
        "message_id": action.message_id,
        "tool_call_id": action.tool_call_id,
        "tool_name": action.tool_name,
        "kind": action.kind,
        "input": action.input,
        "status": action.status,
        "approval_id": action.request.get("approvalId"),
        "created_at": action.created_at,
    }
