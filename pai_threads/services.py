"""The thread service: the trusted operations behind the HTTP API, commands and admin.

Every function takes the caller's :class:`Identity` and filters by its ``scope_key``; a
thread of another scope raises :class:`NotFound` exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils.dateparse import parse_datetime

from pai_agents.agent import InvalidAgentInput
from pai_agents.ids import new_id
from pai_agents.json import NotStrictJson, ensure_strict_json
from pai_threads import registry
from pai_threads.conf import pai_settings
from pai_threads.errors import InvalidInput, NotFound, ThreadBusy
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Thread
from pai_threads.pagination import InvalidPageToken, decode_token, encode_token

__all__ = [
    "Page",
    "SendResult",
    "create_thread",
    "get_run",
    "get_thread",
    "list_messages",
    "list_threads",
    "send",
]

USER_PART_TYPES = frozenset({"text", "file"})


@dataclass(frozen=True, kw_only=True)
class SendResult:
    message: Message
    run: Run
    created: bool


@dataclass(frozen=True, kw_only=True)
class Page:
    items: list[Any]
    next_page_token: str | None


def create_thread(identity: Identity, *, agent: str | None = None, title: str = "") -> Thread:
    agent_name = agent or registry.default_agent_name()
    try:
        registry.get_agent(agent_name)
    except registry.AgentNotFound:
        raise InvalidInput(f"unknown agent {agent_name!r}") from None
    return Thread.objects.create(
        scope_key=identity.scope_key, agent_name=agent_name, title=title[:200]
    )


def get_thread(identity: Identity, thread_id: str) -> Thread:
    try:
        return Thread.objects.get(id=thread_id, scope_key=identity.scope_key)
    except Thread.DoesNotExist:
        raise NotFound("thread not found") from None


def _page_size(limit: int | None) -> int:
    size = limit or pai_settings.PAGE_SIZE
    return max(1, min(size, pai_settings.MAX_PAGE_SIZE))


def list_threads(
    identity: Identity, *, limit: int | None = None, page_token: str | None = None
) -> Page:
    """Most recently updated first; the token resumes after the last thread seen."""
    size = _page_size(limit)
    threads = Thread.objects.filter(scope_key=identity.scope_key).order_by("-updated_at", "-id")
    if page_token:
        try:
            updated_at, last_id = str(decode_token("threads", page_token)).split("|", 1)
        except (InvalidPageToken, ValueError) as exc:
            raise InvalidInput("invalid page token") from exc
        moment = parse_datetime(updated_at)
        threads = threads.filter(Q(updated_at__lt=moment) | Q(updated_at=moment, id__lt=last_id))
    rows = list(threads[: size + 1])
    token = None
    if len(rows) > size:
        rows = rows[:size]
        token = encode_token("threads", f"{rows[-1].updated_at.isoformat()}|{rows[-1].id}")
    return Page(items=rows, next_page_token=token)


def list_messages(
    identity: Identity, thread_id: str, *, limit: int | None = None, page_token: str | None = None
) -> Page:
    """The transcript's latest page, oldest first; the token fetches the page before it."""
    thread = get_thread(identity, thread_id)
    size = _page_size(limit)
    messages = Message.objects.filter(thread=thread, in_transcript=True).order_by("-id")
    if page_token:
        try:
            before = decode_token(f"messages:{thread.id}", page_token)
        except InvalidPageToken as exc:
            raise InvalidInput(str(exc)) from exc
        messages = messages.filter(id__lt=before)
    rows = list(messages[: size + 1])
    token = None
    if len(rows) > size:
        rows = rows[:size]
        token = encode_token(f"messages:{thread.id}", rows[-1].id)
    rows.reverse()
    return Page(items=rows, next_page_token=token)


def get_run(identity: Identity, run_id: str) -> Run:
    try:
        return Run.objects.get(id=run_id, scope_key=identity.scope_key)
    except Run.DoesNotExist:
        raise NotFound("run not found") from None


def _validate_user_message(
    message: Mapping[str, Any],
) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    if message.get("role", "user") != "user":
        raise InvalidInput("only user messages can be sent")
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise InvalidInput("a message needs a non-empty 'parts' list")
    for index, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str) or not (kind in USER_PART_TYPES or kind.startswith("data-")):
            raise InvalidInput(f"parts[{index}]: type must be text, file or data-*")
        if kind == "text" and not isinstance(part.get("text"), str):
            raise InvalidInput(f"parts[{index}]: a text part needs a string 'text'")
        if kind == "file" and not (
            isinstance(part.get("url"), str) and isinstance(part.get("mediaType"), str)
        ):
            raise InvalidInput(f"parts[{index}]: a file part needs 'url' and 'mediaType'")
    metadata = message.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be an object")
    if "pai" in metadata:
        raise InvalidInput("metadata.pai is reserved for the runtime")
    try:
        ensure_strict_json(parts, what="parts")
        ensure_strict_json(metadata, what="metadata")
    except NotStrictJson as exc:
        raise InvalidInput(str(exc)) from exc
    message_id = message.get("id") or new_id("msg")
    if not isinstance(message_id, str) or not 1 <= len(message_id) <= 100:
        raise InvalidInput("message id must be a string of 1 to 100 characters")
    return message_id, parts, metadata


def send(
    identity: Identity,
    thread_id: str,
    message: Mapping[str, Any],
    *,
    client_data: Mapping[str, Any] | None = None,
    dispatch: bool = True,
) -> SendResult:
    """Store a user message and start a run for it, dispatched after commit.

    Idempotent on the message id: a retry with the same id returns the original message
    and run instead of storing anything twice.
    """
    thread = get_thread(identity, thread_id)
    message_id, parts, metadata = _validate_user_message(message)
    try:
        agent = registry.get_agent(thread.agent_name)
    except registry.AgentNotFound:
        raise InvalidInput(f"the thread's agent {thread.agent_name!r} is not available") from None
    try:
        trusted_identity = agent.validate_identity(identity.data)
        data = agent.validate_client_data(client_data)
    except InvalidAgentInput as exc:
        raise InvalidInput(str(exc)) from exc

    existing = _existing_send(thread, message_id)
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            run = Run.objects.create(
                thread=thread,
                scope_key=thread.scope_key,
                agent_name=thread.agent_name,
                identity=trusted_identity,
                client_data=data,
            )
            row = Message.objects.create(
                message_id=message_id,
                thread=thread,
                scope_key=thread.scope_key,
                run=run,
                role="user",
                parts=parts,
                metadata=metadata,
                producer=Message.Producer.SEND,
                relation=Message.Relation.INPUT,
            )
            Thread.objects.filter(pk=thread.pk).update(updated_at=row.created_at)
            if dispatch:
                transaction.on_commit(lambda: _dispatch(run.id))
    except IntegrityError:
        # Either a concurrent retry stored the same message id, or another run is active.
        existing = _existing_send(thread, message_id)
        if existing is not None:
            return existing
        raise ThreadBusy("the thread already has an active run") from None
    return SendResult(message=row, run=run, created=True)


def _existing_send(thread: Thread, message_id: str) -> SendResult | None:
    row = Message.objects.select_related("run").filter(thread=thread, message_id=message_id).first()
    if row is None:
        return None
    if row.run is None or row.role != "user":
        raise InvalidInput("message id already used in this thread")
    return SendResult(message=row, run=row.run, created=False)


def _dispatch(run_id: str) -> None:
    from pai_threads.executors import get_executor

    get_executor().dispatch(run_id)
