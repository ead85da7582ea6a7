"""Request and response schemas of the HTTP API (camelCase on the wire, like the AI SDK)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from pai_threads.api.inputs import (
    ActionIn,
    AiSdkChatIn,
    CreateThreadIn,
    MessageIn,
    SendIn,
    ThreadPatchIn,
)

__all__ = [
    "ActionIn",
    "AiSdkChatIn",
    "CreateThreadIn",
    "ErrorOut",
    "MessageIn",
    "MessagePageOut",
    "RunOut",
    "SendIn",
    "SendOut",
    "SessionOut",
    "ThreadOut",
    "ThreadPageOut",
    "ThreadPatchIn",
    "errors",
]


class CamelSchema(Schema):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ErrorBody(CamelSchema):
    code: str
    message: str
    details: Any = None


class ErrorOut(CamelSchema):
    """Every 4xx and 5xx: ``code`` is stable and machine-readable, ``message`` is for
    people; a 503 carries ``Retry-After`` (seconds)."""

    error: ErrorBody


# Every operation can answer these: unreadable request, no identity, CSRF, unknown id,
# schema mismatch, unexpected failure, database outage.
_COMMON_ERRORS = (400, 401, 403, 404, 422, 500, 503)


def errors(*extra: int) -> dict[int, type[Schema]]:
    """The documented error responses of an operation: the common ones plus ``extra``
    (409 conflicts, 413 for bodies, 415 for uploads)."""
    return {status: ErrorOut for status in sorted({*_COMMON_ERRORS, *extra})}


class SessionOut(CamelSchema):
    csrf_token: str


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


class ThreadPageOut(CamelSchema):
    threads: list[ThreadOut]
    next_page_token: str | None


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


class SendOut(CamelSchema):
    """``message`` when the send started a run; ``queued`` when it waits behind ``run``."""

    message: UIMessageOut | None
    run: RunOut | None
    queued: QueueItemOut | None = None
    created: bool


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


class ThreadStateOut(CamelSchema):
    thread: ThreadOut
    runs: list[RunOut]
    queue: list[QueueItemOut]
    actions: list[ActionOut]


class MessagePageOut(CamelSchema):
    messages: list[UIMessageOut]
    next_page_token: str | None
