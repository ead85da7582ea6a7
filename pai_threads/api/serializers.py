"""Client projections of stored rows. Private fields never leave through here."""

from __future__ import annotations

from typing import Any

from pai_threads.models import Message, PendingAction, QueueItem, Run, Thread

__all__ = ["action_out", "message_out", "queue_item_out", "run_out", "thread_out"]

_CLIENT_ERROR = {"code": "run_failed", "message": "The run failed. Operators can see the details."}


def thread_out(thread: Thread) -> dict[str, Any]:
    return {
        "id": thread.id,
        "agent": thread.agent_name,
        "title": thread.title,
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
    return message.to_ui_message()


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
                "parts": message["parts"],
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
