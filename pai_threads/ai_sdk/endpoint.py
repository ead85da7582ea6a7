"""The AI SDK UI-message stream over SSE, for ``useChat`` with its default HTTP transport.

``POST /api/pai/ai-sdk/chat`` takes ``DefaultChatTransport``'s body (``{id, messages,
trigger, messageId?}``, plus ``clientData`` when the app adds it through ``body``): ``id``
is a PAI thread id of the caller's scope (create it with ``POST /api/pai/threads``; an
unknown or foreign id is 404), the last user message is sent (idempotent on its id), and
the run's chunks stream back as ``data: <chunk>\\n\\n`` lines ending with ``data: [DONE]``.
Every assistant message of the run (one per model step) is framed by its own ``start`` and
``finish``, exactly as the engine published it.
``GET /api/pai/ai-sdk/chat/<id>/stream`` resumes the thread's active stream: the current
generation from its first chunk, then live; 204 when nothing is streaming.

Cookie-authenticated callers must send the CSRF token (``X-CSRFToken`` header through the
transport's ``headers`` option); token-authenticated callers (no session cookie) need not.
Errors use the API's envelope (:mod:`pai_threads.api.envelope`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    StreamingHttpResponse,
)
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from ninja.utils import check_csrf

from pai_threads import services
from pai_threads.api.envelope import ErrorInfo, error_response, json_errors
from pai_threads.errors import InvalidInput, NotFound
from pai_threads.identity import Identity, resolve_identity
from pai_threads.models import PendingAction, Run
from pai_threads.realtime.conf import realtime_setting
from pai_threads.realtime.subscription import ThreadSubscription
from pai_threads.realtime.sync import Resync
from pai_threads.services.input_guard import loads, lookup_id

__all__ = ["approval_request_chunk", "approval_responses", "chat", "resume_stream"]

logger = logging.getLogger("pai.api.ai_sdk")

STREAM_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
    "x-vercel-ai-ui-message-stream": "v1",
}
_STREAMING = frozenset({"queued", "running"})


def _error(status: int, code: str, message: str) -> HttpResponse:
    return error_response(ErrorInfo(status=status, code=code, message=message))


def _authenticate(request: HttpRequest) -> Identity | None:
    """As the JSON API does: CSRF applies when the browser sent the session cookie."""
    if settings.SESSION_COOKIE_NAME in request.COOKIES and check_csrf(request):
        raise PermissionError("CSRF check failed")
    return resolve_identity(request)


async def _identity(request: HttpRequest) -> Identity | HttpResponse:
    try:
        identity = await sync_to_async(_authenticate)(request)
    except PermissionError:
        return _error(403, "forbidden", "CSRF check failed.")
    if identity is None:
        return _error(401, "unauthenticated", "Authentication required.")
    return identity


# -- tool approvals: the SDK's native form of PAI's pending actions -------------------------


def approval_request_chunk(action: Mapping[str, Any]) -> dict[str, Any]:
    """A pending approval action as the SDK's ``tool-approval-request`` chunk, so useChat
    shows it in the tool part's ``approval-requested`` state. ``action`` carries ``id``,
    ``toolCallId`` and optionally ``reason``."""
    chunk: dict[str, Any] = {
        "type": "tool-approval-request",
        "approvalId": str(action["id"]),
        "toolCallId": str(action["toolCallId"]),
    }
    if action.get("reason"):
        chunk["reason"] = str(action["reason"])
    return chunk


def approval_responses(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``addToolApprovalResponse`` answers in an assistant message useChat sends back:
    ``[{"approvalId", "approved", "reason"?}]`` for parts in ``approval-responded``."""
    answers = []
    for part in message.get("parts") or []:
        approval = part.get("approval") if isinstance(part, dict) else None
        if part.get("state") == "approval-responded" and isinstance(approval, dict):
            answer = {"approvalId": approval.get("id"), "approved": approval.get("approved")}
            if approval.get("reason") is not None:
                answer["reason"] = approval["reason"]
            answers.append(answer)
    return answers


# -- streaming --------------------------------------------------------------------------------


def _sse(chunk: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(chunk, separators=(',', ':'), ensure_ascii=False)}\n\n"


async def _run_stream(
    subscription: ThreadSubscription, run_id: str, initial: list[dict[str, Any]]
) -> AsyncIterator[str]:
    """The run's chunks until it stops streaming; owns (and closes) the subscription."""
    keepalive = float(realtime_setting("REALTIME_SSE_KEEPALIVE_SECONDS"))
    poll = min(keepalive, float(realtime_setting("REALTIME_RESYNC_SECONDS")))
    open_message: str | None = None
    skip: set[str] = set()
    idle = 0.0
    try:
        for chunk in initial:
            yield _sse(chunk)
        while True:
            try:
                events = await subscription.next_events(poll)
            except Resync:
                yield _sse({"type": "error", "errorText": "The stream was interrupted."})
                break
            if not events:
                idle += poll
                if idle >= keepalive:
                    idle = 0.0
                    yield ": keepalive\n\n"
                continue
            idle = 0.0
            ended = False
            for event in events:
                if event.get("runId") != run_id:
                    continue
                kind = event["type"]
                if kind == "generation.started":
                    if open_message is not None:
                        # A restarted attempt (worker crash): drop what the abandoned one
                        # showed and continue in the same client message, not a second one.
                        yield _sse({"type": "reset-step"})
                        skip = {"start", "start-step"}
                    open_message = str(event["messageId"])
                elif kind == "generation.message.chunk":
                    chunk = event["chunk"]
                    if chunk["type"] in skip:
                        skip.discard(chunk["type"])
                        continue
                    skip.clear()
                    yield _sse(chunk)
                elif kind == "generation.finished":
                    open_message = None
                elif kind == "run.status" and event["status"] not in _STREAMING:
                    ended = True
            if ended:
                break
        yield "data: [DONE]\n\n"
    finally:
        await subscription.close()


def _streaming(body: AsyncIterator[str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    for name, value in STREAM_HEADERS.items():
        response[name] = value
    return response


async def _empty_stream() -> AsyncIterator[str]:
    yield "data: [DONE]\n\n"


# -- views ------------------------------------------------------------------------------------


def _parse(request: HttpRequest) -> dict[str, Any]:
    body = loads(request.body or b"null")
    if not isinstance(body, dict):
        raise InvalidInput("the body must be a JSON object")
    if not isinstance(body.get("id"), str) or not body["id"]:
        raise InvalidInput("'id' (the thread id) is required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        raise InvalidInput("'messages' must be a non-empty list of UIMessages")
    if body.get("trigger", "submit-message") not in ("submit-message", "regenerate-message"):
        raise InvalidInput("'trigger' must be submit-message or regenerate-message")
    client_data = body.get("clientData")
    if client_data is not None and not isinstance(client_data, dict):
        raise InvalidInput("'clientData' must be an object")
    return body


def _start(identity: Identity, body: dict[str, Any]) -> str | None:
    """Act on the request (the operation publishes its events); the run to stream, or None."""
    thread_id = body["id"]
    last = body["messages"][-1]
    if body.get("trigger") == "regenerate-message":
        return services.regenerate(identity, thread_id).id
    if last.get("role") == "assistant":
        answers = approval_responses(last)
        if not answers:
            raise InvalidInput("the last message must be a user message")
        for answer in answers:
            action = PendingAction.objects.filter(
                thread_id=thread_id, request__approvalId=lookup_id(answer["approvalId"], "approval")
            ).first()
            if action is None:
                raise NotFound("approval not found")
            value = {k: v for k, v in answer.items() if k != "approvalId"}
            services.submit_action(identity, action.id, value)
        active = Run.objects.active().filter(thread_id=thread_id).first()
        return active.id if active else None
    message = {k: last[k] for k in ("id", "role", "parts", "metadata") if k in last}
    result = services.send(identity, thread_id, message, client_data=body.get("clientData"))
    if result.run is None:
        return None
    if not result.created or result.message is None:
        # A resend of a stored message, or input queued behind the active run: follow that run.
        return result.run.id if result.run.status in _STREAMING else None
    return result.run.id


@json_errors
@csrf_exempt  # checked in _authenticate, only for cookie sessions (like the JSON API)
@require_POST
async def chat(request: HttpRequest) -> HttpResponseBase:
    identity = await _identity(request)
    if isinstance(identity, HttpResponse):
        return identity
    body = _parse(request)
    # The thread exists in the caller's scope before anything subscribes to its events.
    await sync_to_async(services.get_thread)(identity, body["id"])
    subscription = ThreadSubscription(body["id"])
    await subscription.__aenter__()
    try:
        run_id = await sync_to_async(_start)(identity, body)
    except BaseException:
        await subscription.close()
        raise
    if run_id is None:
        await subscription.close()
        return _streaming(_empty_stream())
    return _streaming(_run_stream(subscription, run_id, []))


def _active_run(identity: Identity, thread_id: str) -> Run | None:
    thread = services.get_thread(identity, thread_id)
    return Run.objects.filter(thread=thread, status__in=_STREAMING).first()


@json_errors
@require_GET
async def resume_stream(request: HttpRequest, chat_id: str) -> HttpResponseBase:
    identity = await _identity(request)
    if isinstance(identity, HttpResponse):
        return identity
    run = await sync_to_async(_active_run)(identity, chat_id)
    if run is None:
        return HttpResponse(status=204)
    subscription = ThreadSubscription(chat_id)
    await subscription.__aenter__()
    state = subscription.state
    initial: list[dict[str, Any]] = []
    if state is not None and state.generation is not None and state.generation.run_id == run.id:
        events = await subscription.buffer.read(
            chat_id, after=state.generation.start_seq - 1, upto=state.last_seq
        )
        initial = [
            e["chunk"]
            for e in events
            if e["type"] == "generation.message.chunk"
            and e["messageId"] == state.generation.message_id
        ]
    return _streaming(_run_stream(subscription, run.id, initial))
