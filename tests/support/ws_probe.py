"""Helpers of the websocket error, fuzz and fault tests: frames, stored rows, server logs."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from websockets.asyncio.client import ClientConnection

from tests.support.realtime import recv, recv_until
from tests.support.server import DaphneServer

__all__ = [
    "EVENT_TYPES",
    "assert_clean_log",
    "assert_error_frame",
    "ping",
    "reply_to",
    "stored_rows",
]

# Every frame type the server may send besides errors (docs/realtime.md).
EVENT_TYPES = frozenset(
    {
        "snapshot",
        "resumed",
        "synced",
        "ack",
        "pong",
        "message.committed",
        "generation.started",
        "generation.message.chunk",
        "generation.finished",
        "run.status",
        "thread.updated",
        "queue.changed",
        "actions.changed",
    }
)


def assert_error_frame(
    frame: dict[str, Any], code: str | None = None, request_id: object = None
) -> None:
    """The one typed error frame: ``{"type": "error", "error": {code, message, details?},
    "requestId"?}`` (``code`` and ``message`` mirrored at the top level)."""
    assert frame.get("type") == "error", frame
    assert set(frame) <= {"type", "error", "code", "message", "requestId"}, frame
    error = frame["error"]
    assert isinstance(error, dict) and set(error) <= {"code", "message", "details"}, frame
    assert isinstance(error["code"], str) and error["code"], frame
    assert isinstance(error["message"], str) and error["message"], frame
    assert "details" not in error or isinstance(error["details"], dict), frame
    assert (frame["code"], frame["message"]) == (error["code"], error["message"]), frame
    if code is not None:
        assert error["code"] == code, frame
    assert frame.get("requestId") == request_id, frame


async def ping(ws: ClientConnection, request_id: str = "alive") -> list[dict[str, Any]]:
    """Prove the socket still serves commands; returns the frames that came before the pong."""
    await ws.send(json.dumps({"type": "ping", "requestId": request_id}))
    frames = await recv_until(
        ws, lambda f: f.get("type") == "pong" and f.get("requestId") == request_id
    )
    return frames[:-1]


async def reply_to(ws: ClientConnection, payload: str | bytes) -> dict[str, Any]:
    """Send one frame and return the reply (the next ack, error or pong; events skipped)."""
    await ws.send(payload)
    while True:
        frame = await recv(ws)
        if frame["type"] in ("ack", "error", "pong"):
            return frame


def _rows(thread_id: str) -> dict[str, Any]:
    from pai_threads.models import Message, PendingAction, QueueItem, Run, Thread

    thread = Thread.objects.get(id=thread_id)
    return {
        "title": thread.title,
        "version": thread.version,
        "messages": list(
            Message.objects.filter(thread_id=thread_id)
            .order_by("id")
            .values_list("message_id", "role", "in_transcript", "status")
        ),
        "runs": list(
            Run.objects.filter(thread_id=thread_id).order_by("id").values_list("id", "status")
        ),
        "queue": list(QueueItem.objects.filter(thread_id=thread_id).values_list("id", "status")),
        "actions": list(
            PendingAction.objects.filter(thread_id=thread_id).values_list("id", "status")
        ),
    }


async def stored_rows(thread_id: str) -> dict[str, Any]:
    """Everything stored for a thread, to compare before and after bad input."""
    return await sync_to_async(_rows)(thread_id)


def assert_clean_log(server: DaphneServer) -> None:
    """No traceback in the server's log: bad input is never a crash (Channels logs one
    before closing a websocket with 1011)."""
    log = server.log_text()
    for sign in ("Traceback", "Exception inside application"):
        assert sign not in log, f"{sign!r} in the server log:\n{log[-4000:]}"
