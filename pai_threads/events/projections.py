"""How a stored row looks to clients: the one projection of each row, for every surface.

The HTTP API, the websocket (events and snapshots), the AI SDK endpoint and ``pai_chat``
show a thread, run, message, queue item or pending action through the functions here:
``*_out`` gives the row's fields (snake_case, Python values; the HTTP API's response schemas
render them), ``*_public`` the JSON clients receive (camelCase, ISO dates), through the same
schemas. Private columns (``private_metadata``, the run's ``identity``, ``client_data`` and
stored ``error``) never reach this module's output (LC-030, AD-034, AD-037).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import ConfigDict
from pydantic.alias_generators import to_camel
from pydantic_core import to_jsonable_python

from pai_agents.messages.projection import client_message
from pai_threads.models import Message, PendingAction, QueueItem, Run, Thread
from pai_threads.store.suspensions import join_suspensions

__all__ = [
    "ActionOut",
    "CamelSchema",
    "QueueItemOut",
    "RunErrorOut",
    "RunOut",
    "ThreadOut",
    "UIMessageOut",
    "action_out",
    "action_public",
    "actions_public",
    "message_out",
    "message_public",
    "messages_out",
    "queue_item_out",
    "queue_item_public",
    "queue_public",
    "run_out",
    "run_public",
    "stored_message_public",
    "thread_out",
    "thread_public",
]

_CLIENT_ERROR = {"code": "run_failed", "message": "The run failed. Operators can see the details."}


class CamelSchema(Schema):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ThreadOut(CamelSchema):
    id: str
    agent: str
    title: str
    # "" (no title), "generated" (automatic, AD-041) or "manual" (a rename, AD-045).
    title_source: str = ""
    archived: bool = False
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class RunErrorOut(CamelSchema):
    code: str
    message: str


class RunOut(CamelSchema):
    id: str
    thread_id: str
    status: str
    initiator: str
    step_count: int
    attempt: int
    usage: dict[str, Any]
    metadata: dict[str, Any]
    error: RunErrorOut | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class UIMessageOut(CamelSchema):
    model_config = ConfigDict(extra="allow")

    id: str
    role: str
    metadata: dict[str, Any]
    parts: list[dict[str, Any]]


class QueueItemOut(CamelSchema):
    id: str
    policy: str
    status: str
    messages: list[UIMessageOut]
    created_at: datetime


class ActionOut(CamelSchema):
    id: str
    thread_id: str
    run_id: str
    message_id: str
    tool_call_id: str
    tool_name: str
    kind: str
    input: Any
    status: str
    approval_id: str | None
    created_at: datetime
    # An input suspension's name and the JSON schema of its answer (docs/suspensions.md).
    suspension: str | None = None
    answer_schema: dict[str, Any] | None = None


# -- the rows' fields ----------------------------------------------------------------------


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


# RunOut's field -> its JSON name.
_RUN_ALIASES = {name: field.alias or name for name, field in RunOut.model_fields.items()}


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
    # A queued message is never edited before admission: updated when it was accepted.
    accepted = item.created_at.isoformat().replace("+00:00", "Z")  # as Message.to_ui_message
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
                    "pai": {
                        "producer": "send",
                        "status": "pending",
                        "createdAt": accepted,
                        "updatedAt": accepted,
                    },
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
        "suspension": action.request.get("suspension"),
        "answer_schema": action.request.get("schema"),
    }


# -- the JSON clients receive ----------------------------------------------------------------


def thread_public(thread: Thread) -> dict[str, Any]:
    return ThreadOut.model_validate(thread_out(thread)).model_dump(by_alias=True, mode="json")


def run_public(run: Run) -> dict[str, Any]:
    """:class:`RunOut` of ``run`` as JSON values: what ``RunOut.model_validate(run_out(run))
    .model_dump(by_alias=True, mode="json")`` returns, without validating what
    :func:`run_out` just built (every run status event carries one: ~30 us -> ~4 us)."""
    public: dict[str, Any] = to_jsonable_python(
        {_RUN_ALIASES[name]: value for name, value in run_out(run).items()}
    )
    return public


def message_public(message: Message) -> dict[str, Any]:
    return message_out(message)


def stored_message_public(thread_id: str, message_id: str) -> dict[str, Any] | None:
    """The projection of a thread's stored message by its id, or None (deleted)."""
    row = Message.objects.filter(thread_id=thread_id, message_id=message_id).first()
    return message_public(row) if row is not None else None


def queue_item_public(item: QueueItem) -> dict[str, Any]:
    return QueueItemOut.model_validate(queue_item_out(item)).model_dump(by_alias=True, mode="json")


def action_public(action: PendingAction) -> dict[str, Any]:
    return ActionOut.model_validate(action_out(action)).model_dump(by_alias=True, mode="json")


def queue_public(thread_id: str) -> dict[str, Any]:
    """Queued inputs (MF-035): each item carries complete projected user messages."""
    items = QueueItem.objects.filter(thread_id=thread_id, status=QueueItem.Status.QUEUED)
    return {"items": [queue_item_public(item) for item in items.order_by("created_at", "id")]}


def actions_public(thread_id: str) -> list[dict[str, Any]]:
    """Pending actions, joined by clients to tool parts through ``toolCallId`` (MF-024)."""
    actions = PendingAction.objects.filter(
        thread_id=thread_id, status=PendingAction.Status.PENDING
    ).order_by("created_at", "id")
    return [action_public(a) for a in actions]
