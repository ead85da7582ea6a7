"""The AI SDK UI-message stream over SSE, for ``useChat`` with its default HTTP transport.

``POST /api/pai/ai-sdk/chat`` takes ``DefaultChatTransport``'s body (``{id, messages,
trigger, messageId?}``, plus ``clientData`` when the app adds it through ``body``): ``id``
is a PAI thread id of the caller's scope (create it with ``POST /api/pai/threads``; an
unknown or foreign id is 404), the last user message is sent (idempotent on its id), and
the run's chunks stream back as ``data: <chunk>\\n\\n`` lines ending with ``data: [DONE]``.
A last message that is the assistant message useChat continues carries answers instead:
approvals (``addToolApprovalResponse``) and client tool outputs (``addToolOutput``).

The run streams as ONE client message (useChat's ``Chat`` appends a response to one
message): :class:`~pai_threads.events.ui_stream.UIStream` in one-message mode, the view
``GET /api/pai/ai-sdk/chat/<id>/messages`` gives of stored messages
(:mod:`pai_threads.ai_sdk.view`), so what useChat shows live equals what it loads.
``GET /api/pai/ai-sdk/chat/<id>/stream`` resumes the thread's active run: its current
generation from its first chunk, then live; 204 when nothing is streaming.
``POST /api/pai/ai-sdk/chat/<id>/cancel`` cancels the thread's active run (``chat.stop()``
only aborts the fetch; the run goes on without it).

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
from pai_threads.ai_sdk.view import chat_messages
from pai_threads.api.envelope import ErrorInfo, error_response, json_errors
from pai_threads.errors import InvalidInput, NotFound
from pai_threads.events.projections import messages_out, run_public
from pai_threads.events.ui_stream import STREAMING_STATUSES, UIStream
from pai_threads.identity import Identity, resolve_identity
from pai_threads.models import Message, PendingAction, Run
from pai_threads.realtime.conf import realtime_setting
from pai_threads.realtime.subscription import ThreadSubscription
from pai_threads.realtime.sync import Resync
from pai_threads.services.input_guard import loads, lookup_id

__all__ = [
    "approval_request_chunk",
    "approval_responses",
    "cancel",
    "chat",
    "client_tool_outputs",
    "messages",
    "resume_stream",
]

logger = logging.getLogger("pai.api.ai_sdk")

STREAM_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
    "x-vercel-ai-ui-message-stream": "v1",
}
_STREAMING = STREAMING_STATUSES
_ANSWERED_TOOL = frozenset({"output-available", "output-error"})


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


def client_tool_outputs(message: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``addToolOutput`` answers in an assistant message useChat sends back, by toolCallId:
    ``{"output": ...}`` or ``{"errorText": ...}`` for parts in a final state (the ones that
    answer a pending client tool are submitted; others are already stored)."""
    answers: dict[str, dict[str, Any]] = {}
    for part in message.get("parts") or []:
        if not isinstance(part, dict) or part.get("state") not in _ANSWERED_TOOL:
            continue
        call_id = part.get("toolCallId")
        if isinstance(call_id, str):
            if part["state"] == "output-error":
                answers[call_id] = {"errorText": str(part.get("errorText") or "")}
            else:
                answers[call_id] = {"output": part.get("output")}
    return answers


# -- streaming --------------------------------------------------------------------------------


def _sse(chunk: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(chunk, separators=(',', ':'), ensure_ascii=False)}\n\n"


async def _run_stream(
    subscription: ThreadSubscription, stream: UIStream, initial: list[dict[str, Any]]
) -> AsyncIterator[str]:
    """The run's chunks as one client message until it stops streaming; owns (and closes)
    the subscription. ``initial``: replayed events of the current generation."""
    keepalive = float(realtime_setting("REALTIME_SSE_KEEPALIVE_SECONDS"))
    poll = min(keepalive, float(realtime_setting("REALTIME_RESYNC_SECONDS")))
    idle = 0.0
    try:
        for replayed in initial:
            for chunk in stream.feed(replayed):
                yield _sse(chunk)
        while not stream.ended:
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
            for event in events:
                for chunk in stream.feed(event):
                    yield _sse(chunk)
                if stream.ended:
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


def _held_steps(run_id: str) -> list[str]:
    """The run's committed assistant messages, oldest first: what the client message of a
    continuation or a resume already holds."""
    rows = Message.objects.filter(
        run_id=run_id, role="assistant", in_transcript=True, status=Message.Status.COMMITTED
    ).order_by("id")
    return [str(m) for m in rows.values_list("message_id", flat=True)]


def _answer(identity: Identity, thread_id: str, last: Mapping[str, Any]) -> UIStream | None:
    """Submit the approvals and client tool outputs of the assistant message useChat sent
    back; the active run to follow, as a continuation of that message."""
    answers = approval_responses(last)
    for answer in answers:
        action = PendingAction.objects.filter(
            thread_id=thread_id, request__approvalId=lookup_id(answer["approvalId"], "approval")
        ).first()
        if action is None:
            raise NotFound("approval not found")
        value = {k: v for k, v in answer.items() if k != "approvalId"}
        services.submit_action(identity, action.id, value)
    outputs = client_tool_outputs(last)
    pending = PendingAction.objects.filter(
        thread_id=thread_id,
        kind=PendingAction.Kind.CLIENT,
        status=PendingAction.Status.PENDING,
        tool_call_id__in=list(outputs),
    )
    submitted = 0
    for action in pending:
        services.submit_action(identity, action.id, outputs[action.tool_call_id])
        submitted += 1
    if not answers and not submitted:
        raise InvalidInput("the last message must be a user message")
    active = Run.objects.active().filter(thread_id=thread_id).first()
    if active is None:
        return None
    return UIStream(active.id, one_message=True, message_ids=_held_steps(active.id))


def _start(identity: Identity, body: dict[str, Any]) -> UIStream | None:
    """Act on the request (the operation publishes its events); the run to stream, or None."""
    thread_id = body["id"]
    last = body["messages"][-1]
    if body.get("trigger") == "regenerate-message":
        return UIStream(services.regenerate(identity, thread_id).id, one_message=True)
    if last.get("role") == "assistant":
        return _answer(identity, thread_id, last)
    message = {k: last[k] for k in ("id", "role", "parts", "metadata") if k in last}
    result = services.send(identity, thread_id, message, client_data=body.get("clientData"))
    if result.run is None:
        return None
    if not result.created or result.message is None:
        # A resend of a stored message, or input queued behind the active run: follow that run.
        if result.run.status not in _STREAMING:
            return None
        return UIStream(result.run.id, one_message=True, message_ids=_held_steps(result.run.id))
    return UIStream(result.run.id, one_message=True)


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
        stream = await sync_to_async(_start)(identity, body)
    except BaseException:
        await subscription.close()
        raise
    if stream is None:
        await subscription.close()
        return _streaming(_empty_stream())
    return _streaming(_run_stream(subscription, stream, []))


def _active_run(identity: Identity, thread_id: str) -> tuple[Run, list[str]] | None:
    thread = services.get_thread(identity, thread_id)
    run = Run.objects.filter(thread=thread, status__in=_STREAMING).first()
    return None if run is None else (run, _held_steps(run.id))


@json_errors
@require_GET
async def resume_stream(request: HttpRequest, chat_id: str) -> HttpResponseBase:
    identity = await _identity(request)
    if isinstance(identity, HttpResponse):
        return identity
    active = await sync_to_async(_active_run)(identity, chat_id)
    if active is None:
        return HttpResponse(status=204)
    run, held = active
    subscription = ThreadSubscription(chat_id)
    await subscription.__aenter__()
    state = subscription.state
    initial: list[dict[str, Any]] = []
    if state is not None and state.generation is not None and state.generation.run_id == run.id:
        events = await subscription.buffer.read(
            chat_id, after=state.generation.start_seq - 1, upto=state.last_seq
        )
        initial = [
            dict(e)
            for e in events
            if e["type"] == "generation.message.chunk"
            and e["messageId"] == state.generation.message_id
        ]
    # The client holds the run's committed steps (the loaded view); the current one replays.
    stream = UIStream(run.id, one_message=True, message_ids=held)
    return _streaming(_run_stream(subscription, stream, initial))


def _messages(identity: Identity, thread_id: str, limit: int | None, token: str | None) -> Any:
    page = services.list_messages(identity, thread_id, limit=limit, page_token=token)
    return {
        "messages": chat_messages(messages_out(page.items)),
        "nextPageToken": page.next_page_token,
    }


@json_errors
@require_GET
async def messages(request: HttpRequest, chat_id: str) -> HttpResponseBase:
    """useChat's initial ``messages``: the transcript's latest page in the one-message-per-run
    view the stream gives (:mod:`pai_threads.ai_sdk.view`); ``pageToken`` pages back."""
    identity = await _identity(request)
    if isinstance(identity, HttpResponse):
        return identity
    raw_limit = request.GET.get("limit")
    if raw_limit is not None and not raw_limit.isdigit():
        raise InvalidInput("'limit' must be a positive integer")
    limit = int(raw_limit) if raw_limit is not None else None
    body = await sync_to_async(_messages)(identity, chat_id, limit, request.GET.get("pageToken"))
    return HttpResponse(json.dumps(body), content_type="application/json")


def _cancel(identity: Identity, thread_id: str) -> dict[str, Any]:
    thread = services.get_thread(identity, thread_id)
    active = Run.objects.active().filter(thread=thread).first()
    if active is None:
        return {"run": None}
    return {"run": run_public(services.cancel_run(identity, active.id))}


@json_errors
@csrf_exempt  # checked in _authenticate, only for cookie sessions
@require_POST
async def cancel(request: HttpRequest, chat_id: str) -> HttpResponseBase:
    """Cancel the thread's active run (what ``chat.stop()`` cannot: it only aborts the
    fetch). ``{"run": <the cancelled run> | null}``."""
    identity = await _identity(request)
    if isinstance(identity, HttpResponse):
        return identity
    body = await sync_to_async(_cancel)(identity, chat_id)
    return HttpResponse(json.dumps(body), content_type="application/json")
