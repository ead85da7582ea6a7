"""Commands clients send over the thread websocket, each mapped to a service function.

A command frame is ``{"type": <command>, "requestId"?: str, ...}``; the reply is an ``ack``
(with the command's result) or the typed error frame (:func:`.frames.error_frame`), both
echoing ``requestId``. A command that fails changes nothing: every check (field types,
scope, stale views) comes before the service call, which is one transaction. Commands whose
service does not exist in this version answer ``unsupported`` rather than pretending to work.
The ``command`` frame calls one of the agent's own commands and is answered
``command.result`` / ``command.error`` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

from pai_threads import services
from pai_threads.errors import InvalidInput, NotFound, PaiError
from pai_threads.events.projections import queue_item_public, run_public, thread_public
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Run, Thread
from pai_threads.store.admission import lock_thread
from pai_threads.store.db import run_db
from pai_threads.websocket.frames import error_frame, exception_frame, request_id_of

__all__ = ["COMMANDS", "CommandError", "StaleView", "run_command"]

Frame = dict[str, Any]


class CommandError(PaiError):
    """A frame the server cannot act on (wrong shape, unknown or unsupported command)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class StaleView(CommandError):
    """The command names a state the thread has left (e.g. regenerating an old answer)."""

    def __init__(self, message: str) -> None:
        super().__init__("stale", message)


def _text_or_message(frame: Frame) -> dict[str, Any]:
    message, text = frame.get("message"), frame.get("text")
    if (message is None) == (text is None):
        raise InvalidInput("send exactly one of 'message' or 'text'")
    if text is not None:
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("'text' must be a non-empty string")
        return {"role": "user", "parts": [{"type": "text", "text": text}]}
    if not isinstance(message, dict):
        raise InvalidInput("'message' must be a UIMessage object")
    return message


def _send(identity: Identity, thread_id: str, frame: Frame) -> Frame:
    client_data = frame.get("clientData")
    if client_data is not None and not isinstance(client_data, dict):
        raise InvalidInput("'clientData' must be an object")
    policy = _optional_str(frame, "policy")
    result = services.send(
        identity,
        thread_id,
        _text_or_message(frame),
        client_data=client_data,
        policy=policy,  # type: ignore[arg-type]  # services validates the value
    )
    reply: Frame = {"created": result.created}
    if result.message_public is not None:
        reply["message"] = result.message_public
    if result.run is not None:
        reply["run"] = run_public(result.run)
    if result.queue_item is not None:
        reply["queued"] = queue_item_public(result.queue_item)  # as over HTTP
    return reply


def _rename(identity: Identity, thread_id: str, frame: Frame) -> Frame:
    return {
        "thread": thread_public(services.rename_thread(identity, thread_id, frame.get("title")))
    }


def _service(name: str) -> Callable[..., Any]:
    function = getattr(services, name, None)
    if function is None:
        raise CommandError("unsupported", f"this server does not support {name} yet")
    return function


def _optional_str(frame: Frame, key: str) -> str | None:
    value = frame.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"'{key}' must be a string")
    return value


def _cancel(identity: Identity, thread_id: str, frame: Frame) -> Frame:
    """Cancel ``runId``, or the thread's active run: whichever client or stream started it."""
    cancel_run = _service("cancel_run")
    run_id = _optional_str(frame, "runId")
    if run_id is None:
        thread = services.get_thread(identity, thread_id)
        active = Run.objects.active().filter(thread=thread).first()
        if active is None:
            raise InvalidInput("the thread has no active run")
        run_id = active.id
    elif not Run.objects.filter(id=run_id, thread_id=thread_id).exists():
        raise NotFound("run not found")
    return {"run": run_public(cancel_run(identity, run_id))}


def _regenerate(identity: Identity, thread_id: str, frame: Frame) -> Frame:
    """Regenerate the latest answer; with ``messageId`` (what the client sees as the latest
    exchange), only if that is still the latest: two tabs never regenerate twice."""
    regenerate = _service("regenerate")
    message_id = _optional_str(frame, "messageId")
    with transaction.atomic():
        thread = services.get_thread(identity, thread_id)
        if message_id is not None:
            lock_thread(thread.id)
            _ensure_latest_exchange(thread, message_id)
        run = run_public(regenerate(identity, thread_id))
    return {"run": run}


def _ensure_latest_exchange(thread: Thread, message_id: str) -> None:
    """``message_id`` is the latest user message or one of its answers, else StaleView."""
    row = (
        Message.objects.filter(thread=thread, message_id=message_id)
        .values("id", "in_transcript")
        .first()
    )
    if row is None:
        raise NotFound("message not found")
    latest_user = (
        Message.objects.filter(thread=thread, role="user", in_transcript=True)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    if not row["in_transcript"] or (latest_user is not None and row["id"] < latest_user):
        raise StaleView("the message is no longer the latest answer: resync and try again")


def _submit_action(identity: Identity, thread_id: str, frame: Frame) -> Frame:
    submit_action = _service("submit_action")
    action_id = frame.get("actionId")
    if not isinstance(action_id, str) or not action_id:
        raise InvalidInput("'actionId' must be a non-empty string")
    value = frame.get("value")
    if not isinstance(value, dict):
        raise InvalidInput("'value' must be an object, e.g. {\"approved\": true}")
    if not PendingAction.objects.filter(id=action_id, thread_id=thread_id).exists():
        raise NotFound("action not found")
    submit_action(identity, action_id, value)
    return {"actionId": action_id}


COMMANDS: dict[str, Callable[[Identity, str, Frame], Frame]] = {
    "send": _send,
    "rename": _rename,
    "cancel": _cancel,
    "regenerate": _regenerate,
    "submit-action": _submit_action,
}


async def _agent_command(identity: Identity, thread_id: str, frame: Frame) -> Frame:
    """``{"type": "command", "name", "input"?, "clientData"?}``: one of the agent's exposed
    commands (docs/commands.md), answered ``command.result`` or ``command.error``."""
    request_id = request_id_of(frame)
    echo: Frame = {"requestId": request_id} if request_id is not None else {}
    name = frame.get("name")
    try:
        if not isinstance(name, str) or not name:
            raise InvalidInput("'name' must be a non-empty string")
        result = await services.ainvoke_command(
            identity,
            thread_id,
            name,
            frame.get("input"),
            frame.get("clientData"),
            exposed_only=True,
        )
    except Exception as exc:  # typed errors keep their code; a bug is logged by describe()
        return {**exception_frame(exc, request_id), "type": "command.error"}
    reply: Frame = {"type": "command.result", **echo, "name": result.command}
    reply["output"] = result.output
    if result.run is not None:
        reply["run"] = run_public(result.run)
    if result.message_public is not None:
        reply["message"] = result.message_public
    if result.queue_item is not None:
        reply["queued"] = queue_item_public(result.queue_item)
    return reply


async def run_command(identity: Identity, thread_id: str, frame: Frame) -> Frame:
    """Execute one command frame; always returns the reply frame (never raises)."""
    kind = frame["type"]
    request_id = request_id_of(frame)
    if kind == "command":
        return await _agent_command(identity, thread_id, frame)
    handler = COMMANDS.get(kind)
    if handler is None:
        return error_frame(
            "unknown_command",
            f"unknown command {kind[:100]!r}",
            details={"commands": [*sorted(COMMANDS), "command", "ping", "resume", "sync"]},
            request_id=request_id,
        )
    try:
        # On the store threads, whose connections stay open: Channels'
        # database_sync_to_async closes the connection after every call (CONN_MAX_AGE 0),
        # and a new one cost a send more than its SQL (SQLite ~1 ms; a pool's check).
        result = await run_db(handler, identity, thread_id, frame)
    except Exception as exc:  # typed errors keep their code; a bug is logged by describe()
        return exception_frame(exc, request_id)
    reply: Frame = {"requestId": request_id} if request_id is not None else {}
    return {"type": "ack", "command": kind, **reply, **result}
