"""The HTTP API under ``/api/pai/`` (django-ninja; OpenAPI docs at ``/api/pai/docs``).

Every error is the envelope of :mod:`pai_threads.api.envelope`; the OpenAPI document is
completed by :mod:`pai_threads.api.openapi`.
"""

from __future__ import annotations

import logging
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from ninja import Query, Schema, Status
from ninja.errors import HttpError
from ninja.errors import ValidationError as NinjaValidationError
from pydantic import ConfigDict, Field

from pai_threads import services
from pai_threads.api.auth import IdentityAuth, request_identity
from pai_threads.api.commands import router as commands_router
from pai_threads.api.envelope import exception_response
from pai_threads.api.files import router as files_router
from pai_threads.api.openapi import PaiNinjaAPI
from pai_threads.api.schemas import (
    ActionIn,
    ActionOut,
    CreateThreadIn,
    MessagePageOut,
    RunOut,
    SendIn,
    SendOut,
    SessionOut,
    ThreadOut,
    ThreadPageOut,
    ThreadPatchIn,
    ThreadStateOut,
    errors,
)
from pai_threads.api.usage import router as usage_router
from pai_threads.conf import pai_settings
from pai_threads.errors import InvalidInput, NotFound, PayloadTooLarge
from pai_threads.events.projections import (
    action_out,
    messages_out,
    queue_item_out,
    run_out,
    thread_out,
)
from pai_threads.execution import registry

__all__ = ["api"]

logger = logging.getLogger("pai.api")

api = PaiNinjaAPI(
    title="PAI for Django",
    version="1",
    urls_namespace="pai-api",
    auth=IdentityAuth(),
    docs_url="/docs",
)
api.add_router("/files", files_router)
api.add_router("/", usage_router)
api.add_router("/", commands_router)
# ninja's own handlers (and its DEBUG traceback page) replaced: one envelope for all.
for _error_class in (Exception, Http404, HttpError, NinjaValidationError):
    api.add_exception_handler(_error_class, exception_response)


class PageQuery(Schema):
    model_config = ConfigDict(populate_by_name=True)

    limit: int | None = Field(default=None, ge=1)
    page_token: str | None = Field(default=None, alias="pageToken", max_length=500)


@api.get(
    "/session", auth=None, response={200: SessionOut, **errors()}, by_alias=True, tags=["session"]
)
def session(request: HttpRequest) -> dict[str, str]:
    """The CSRF token for cookie-authenticated clients (send it back as X-CSRFToken)."""
    return {"csrfToken": get_token(request)}


@api.get(
    "/agents", response={200: list[dict[str, Any]], **errors()}, by_alias=True, tags=["agents"]
)
def list_agents(request: HttpRequest) -> list[dict[str, Any]]:
    return [agent.manifest() for agent in registry.agents().values()]


@api.get(
    "/agents/{name}/contract",
    response={200: dict[str, Any], **errors()},
    by_alias=True,
    tags=["agents"],
)
def agent_contract(request: HttpRequest, name: str) -> dict[str, Any]:
    """The agent's public contract (AD-077): JSON Schemas of its payloads for client
    codegen; server-only commands and private metadata shapes never leave the server."""
    try:
        agent = registry.get_agent(name)
    except registry.AgentNotFound:
        raise NotFound(f"unknown agent {name!r}") from None
    return agent.contract.public().as_dict()


@api.post("/threads", response={201: ThreadOut, **errors(413)}, by_alias=True, tags=["threads"])
def create_thread(request: HttpRequest, body: CreateThreadIn) -> Status[dict[str, Any]]:
    thread = services.create_thread(request_identity(request), agent=body.agent, title=body.title)
    return Status(201, thread_out(thread))


@api.get("/threads", response={200: ThreadPageOut, **errors()}, by_alias=True, tags=["threads"])
def list_threads(
    request: HttpRequest, page: Query[PageQuery], archived: bool | None = None
) -> dict[str, Any]:
    """Most recently updated first; ``archived=true|false`` lists only archived or only
    active threads (both when omitted)."""
    result = services.list_threads(
        request_identity(request), limit=page.limit, page_token=page.page_token, archived=archived
    )
    return {
        "threads": [thread_out(t) for t in result.items],
        "next_page_token": result.next_page_token,
    }


@api.get(
    "/threads/{thread_id}", response={200: ThreadOut, **errors()}, by_alias=True, tags=["threads"]
)
def get_thread(request: HttpRequest, thread_id: str) -> dict[str, Any]:
    return thread_out(services.get_thread(request_identity(request), thread_id))


@api.patch(
    "/threads/{thread_id}",
    response={200: ThreadOut, **errors(413)},
    by_alias=True,
    tags=["threads"],
)
def update_thread(request: HttpRequest, thread_id: str, body: ThreadPatchIn) -> dict[str, Any]:
    """Rename (``title``) and/or archive or restore (``archived``) the thread (an empty
    body changes nothing); its websocket subscribers get ``thread.updated``."""
    identity = request_identity(request)
    thread = services.get_thread(identity, thread_id)
    if body.title is not None:
        thread = services.rename_thread(identity, thread_id, body.title)
    if body.archived is not None and body.archived != thread.archived:
        thread = services.set_archived(identity, thread_id, body.archived)
    return thread_out(thread)


@api.delete(
    "/threads/{thread_id}", response={204: None, **errors()}, by_alias=True, tags=["threads"]
)
def delete_thread(request: HttpRequest, thread_id: str) -> HttpResponse:
    """Delete the thread and everything in it (an active run is stopped first); its
    websocket subscribers get ``thread.deleted``. Another scope's thread is 404."""
    services.delete_thread(request_identity(request), thread_id)
    return HttpResponse(status=204)


@api.post(
    "/threads/{thread_id}/messages",
    response={202: SendOut, 200: SendOut, **errors(409, 413)},
    by_alias=True,
    tags=["threads"],
)
def send_message(request: HttpRequest, thread_id: str, body: SendIn) -> Status[dict[str, Any]]:
    if len(request.body) > pai_settings.MAX_MESSAGE_BYTES:
        raise PayloadTooLarge(f"The message is larger than {pai_settings.MAX_MESSAGE_BYTES} bytes.")
    if (body.message is None) == (body.text is None):
        raise InvalidInput("send exactly one of 'message' or 'text'")
    message = (
        body.message.model_dump(exclude_none=True)
        if body.message is not None
        else {"role": "user", "parts": [{"type": "text", "text": body.text}]}
    )
    result = services.send(
        request_identity(request),
        thread_id,
        message,
        client_data=body.client_data,
        policy=body.policy,
    )
    payload = {
        "message": result.message_public,
        "run": run_out(result.run) if result.run else None,
        "queued": queue_item_out(result.queue_item) if result.queue_item else None,
        "created": result.created,
    }
    return Status(202 if result.created else 200, payload)


@api.get(
    "/threads/{thread_id}/messages",
    response={200: MessagePageOut, **errors()},
    by_alias=True,
    tags=["threads"],
)
def list_messages(request: HttpRequest, thread_id: str, page: Query[PageQuery]) -> dict[str, Any]:
    result = services.list_messages(
        request_identity(request), thread_id, limit=page.limit, page_token=page.page_token
    )
    return {
        "messages": messages_out(result.items),
        "next_page_token": result.next_page_token,
    }


@api.get("/runs/{run_id}", response={200: RunOut, **errors()}, by_alias=True, tags=["runs"])
def get_run(request: HttpRequest, run_id: str) -> dict[str, Any]:
    return run_out(services.get_run(request_identity(request), run_id))


@api.post(
    "/runs/{run_id}/cancel", response={200: RunOut, **errors(413)}, by_alias=True, tags=["runs"]
)
def cancel_run(request: HttpRequest, run_id: str) -> dict[str, Any]:
    """Cancel a run; a running one stops at once in this process, else at its next heartbeat."""
    return run_out(services.cancel_run(request_identity(request), run_id))


@api.post(
    "/threads/{thread_id}/regenerate",
    response={202: RunOut, **errors(409, 413)},
    by_alias=True,
    tags=["threads"],
)
def regenerate(request: HttpRequest, thread_id: str) -> Status[dict[str, Any]]:
    """Answer the latest user message again (its previous answer leaves the transcript)."""
    return Status(202, run_out(services.regenerate(request_identity(request), thread_id)))


@api.get(
    "/threads/{thread_id}/state",
    response={200: ThreadStateOut, **errors()},
    by_alias=True,
    tags=["threads"],
)
def thread_state(request: HttpRequest, thread_id: str) -> dict[str, Any]:
    """The thread head, its recent runs (public fields), queued input and pending actions."""
    identity = request_identity(request)
    thread = services.get_thread(identity, thread_id)
    runs = list(thread.runs.order_by("-created_at")[:20])
    return {
        "thread": thread_out(thread),
        "runs": [run_out(r) for r in reversed(runs)],
        "queue": [queue_item_out(i) for i in services.list_queue(identity, thread_id)],
        "actions": [action_out(a) for a in services.list_actions(identity, thread_id=thread_id)],
    }


@api.get("/actions", response={200: list[ActionOut], **errors()}, by_alias=True, tags=["actions"])
def list_actions(request: HttpRequest, thread_id: str | None = None) -> list[dict[str, Any]]:
    """Pending actions of this identity (optionally of one thread)."""
    return [
        action_out(a) for a in services.list_actions(request_identity(request), thread_id=thread_id)
    ]


@api.post(
    "/actions/{action_id}",
    response={200: ActionOut, **errors(409, 413)},
    by_alias=True,
    tags=["actions"],
)
def submit_action(request: HttpRequest, action_id: str, body: ActionIn) -> dict[str, Any]:
    """Approve or deny a tool call, give a client tool's result, or answer a declared
    suspension (``answer``, validated: 422 ``invalid_answer``); accepted once only."""
    answer = body.model_dump(exclude_unset=True, by_alias=True)
    return action_out(services.submit_action(request_identity(request), action_id, answer))
