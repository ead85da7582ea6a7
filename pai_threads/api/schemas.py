"""Request and response schemas of the HTTP API (camelCase on the wire, like the AI SDK)."""

from __future__ import annotations

from typing import Any

from ninja import Schema

from pai_threads.api.inputs import (
    ActionIn,
    AiSdkChatIn,
    CreateThreadIn,
    MessageIn,
    SendIn,
    ThreadPatchIn,
)
from pai_threads.events.projections import (
    ActionOut,
    CamelSchema,
    QueueItemOut,
    RunErrorOut,
    RunOut,
    ThreadOut,
    UIMessageOut,
)

__all__ = [
    "ActionIn",
    "ActionOut",
    "AiSdkChatIn",
    "CreateThreadIn",
    "ErrorOut",
    "MessageIn",
    "MessagePageOut",
    "QueueItemOut",
    "RunErrorOut",
    "RunOut",
    "SendIn",
    "SendOut",
    "SessionOut",
    "ThreadOut",
    "ThreadPageOut",
    "ThreadPatchIn",
    "ThreadStateOut",
    "UIMessageOut",
    "errors",
]


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


class ThreadPageOut(CamelSchema):
    threads: list[ThreadOut]
    next_page_token: str | None


class SendOut(CamelSchema):
    """``message`` when the send started a run; ``queued`` when it waits behind ``run``."""

    message: UIMessageOut | None
    run: RunOut | None
    queued: QueueItemOut | None = None
    created: bool


class ThreadStateOut(CamelSchema):
    thread: ThreadOut
    runs: list[RunOut]
    queue: list[QueueItemOut]
    actions: list[ActionOut]


class MessagePageOut(CamelSchema):
    messages: list[UIMessageOut]
    next_page_token: str | None
