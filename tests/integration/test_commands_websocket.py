"""Commands over the thread websocket, against a real daphne server with real clients.

``{"type": "command", "requestId", "name", "input"}`` is answered ``command.result`` or
``command.error`` (the HTTP API's error body); a command's facade writes reach every live
client of the thread as events, with nothing private in them; a run a command starts
streams like any run and carries initiator ``command``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from pai_threads.models import Run, Thread
from tests.support.realtime import recv_until, server_fixture
from tests.support.server import Browser, DaphneServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

server = server_fixture("commands", DJANGO_SETTINGS_MODULE="tests.support.command_settings")

Frame = dict[str, Any]


def _reply(request_id: str) -> Any:
    def done(frame: Frame) -> bool:
        return frame.get("requestId") == request_id and frame["type"].startswith("command.")

    return done


async def _command(ws: Any, request_id: str, name: str, input: Any = None) -> list[Frame]:
    frame: Frame = {"type": "command", "requestId": request_id, "name": name}
    if input is not None:
        frame["input"] = input
    await ws.send(json.dumps(frame))
    return await recv_until(ws, _reply(request_id))


async def test_a_command_over_the_websocket_writes_to_the_thread_for_every_live_client(
    server: DaphneServer,
) -> None:
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("commander")
        async with alice.websocket(thread_id) as ws, alice.websocket(thread_id) as watcher:
            await recv_until(ws, lambda f: f["type"] == "synced")
            await recv_until(watcher, lambda f: f["type"] == "synced")
            frames = await _command(ws, "c1", "add_note", {"text": "call back Monday"})
            result = frames[-1]
            assert result["type"] == "command.result" and result["name"] == "add_note"
            message_id = result["output"]["messageId"]
            seen = await recv_until(
                watcher,
                lambda f: f["type"] == "message.committed" and f["message"]["id"] == message_id,
            )
            committed = seen[-1]["message"]
            assert committed["role"] == "assistant"
            assert committed["parts"] == [{"type": "text", "text": "Note: call back Monday"}]

            await _command(ws, "c2", "mark_resolved")
            updated = await recv_until(watcher, lambda f: f["type"] == "thread.updated")
            assert updated[-1]["thread"]["metadata"] == {"resolved": True}
            assert "resolved_by" not in json.dumps(seen + updated)
    stored = await sync_to_async(Thread.objects.get)(id=thread_id)
    assert stored.metadata == {"resolved": True} and "resolved_by" in stored.private_metadata


@contextlib.asynccontextmanager
async def _connected(server: DaphneServer) -> AsyncIterator[tuple[Browser, str, Any]]:
    """A browser, a new thread of ``commander`` and a synced socket on it."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("commander")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            yield alice, thread_id, ws


async def test_command_errors_over_the_websocket_are_typed_and_the_socket_stays_open(
    server: DaphneServer,
) -> None:
    async with _connected(server) as (_, _thread_id, ws):
        cases: list[tuple[str, Any, str]] = [
            ("purge", None, "not_found"),  # server-only: not disclosed
            ("nope", None, "not_found"),
            ("add_note", {"text": 7}, "invalid_input"),
            ("add_note", [1], "invalid_input"),
            ("add_note", "x", "invalid_input"),
            ("refuse", None, "command_failed"),
            ("broken", None, "command_failed"),
        ]
        for index, (name, input, code) in enumerate(cases):
            reply = (await _command(ws, f"e{index}", name, input))[-1]
            assert reply["type"] == "command.error", reply
            assert reply["error"]["code"] == code, (name, reply)
            assert "secret" not in json.dumps(reply)
        for index, frame in enumerate(
            [
                {"type": "command", "requestId": "n1"},
                {"type": "command", "requestId": "n2", "name": 5},
                {"type": "command", "requestId": "n3", "name": "add_note", "clientData": 1},
            ]
        ):
            await ws.send(json.dumps(frame))
            reply = (await recv_until(ws, _reply(f"n{index + 1}")))[-1]
            assert reply["type"] == "command.error"
            assert reply["error"]["code"] == "invalid_input"
        hidden = (await _command(ws, "h1", "purge"))[-1]["error"]
        missing = (await _command(ws, "h2", "nope"))[-1]["error"]
        assert hidden == missing
        ok = (await _command(ws, "ok", "export_transcript"))[-1]
        assert ok["type"] == "command.result" and ok["output"] == {"count": 0, "text": ""}


async def test_a_command_over_the_websocket_starts_a_run_with_initiator_command(
    server: DaphneServer,
) -> None:
    async with _connected(server) as (alice, thread_id, ws):
        frames = await _command(ws, "r1", "summarise", {"words": 3})
        result = frames[-1]
        assert result["type"] == "command.result" and result["run"]["initiator"] == "command"
        run_id = result["run"]["id"]
        ended = await recv_until(
            ws,
            lambda f: (
                f["type"] == "run.status" and f["runId"] == run_id and f["status"] == "completed"
            ),
        )
        assert any(f["type"] == "generation.message.chunk" for f in frames + ended)
        stored = await alice.messages(thread_id)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert (await sync_to_async(Run.objects.get)(id=run_id)).initiator == "command"
