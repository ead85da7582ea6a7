"""Every bad websocket frame gets the one typed error frame; nothing is stored half-way.

A real daphne server (``tests.support.ws_settings``) and real websocket clients: garbage,
deep nesting (``json.loads`` raises ``RecursionError``), NUL characters and unpaired
surrogates, oversize and binary frames, wrong field types, another scope's thread, run,
action and message ids, and stale views. After each, the socket still serves commands, the
thread's rows are unchanged, and the server logged no traceback (never a 1011 close).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from tests.support.realtime import recv, recv_until, server_fixture
from tests.support.server import Browser, DaphneServer
from tests.support.ws_probe import (
    assert_clean_log,
    assert_error_frame,
    ping,
    reply_to,
    stored_rows,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


server = server_fixture("websocket-errors", DJANGO_SETTINGS_MODULE="tests.support.ws_settings")


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# (frame, expected code): each is refused before any command runs.
BAD_FRAMES: list[tuple[str, str | bytes, str]] = [
    ("garbage", "{not json", "invalid_json"),
    ("truncated", '{"type": "send", "text": "hi"', "invalid_json"),
    ("nan", '{"type": "ping", "x": NaN}', "invalid_json"),
    ("infinity", '{"type": "send", "text": "x", "clientData": {"n": -Infinity}}', "invalid_json"),
    ("huge-int", '{"type": "ping", "n": ' + "9" * 5000 + "}", "invalid_json"),
    ("empty", "", "invalid_json"),
    ("array", "[1, 2]", "invalid_frame"),
    ("string", '"send"', "invalid_frame"),
    ("null", "null", "invalid_frame"),
    ("no-type", "{}", "invalid_frame"),
    ("type-number", '{"type": 7}', "invalid_frame"),
    ("type-null", '{"type": null}', "invalid_frame"),
    ("request-id-bool", '{"type": "ping", "requestId": true}', "invalid_frame"),
    ("request-id-object", '{"type": "ping", "requestId": {}}', "invalid_frame"),
    # RecursionError inside json.loads (far beyond the interpreter's recursion limit).
    (
        "recursion",
        '{"type": "send", "text": "x", "clientData": ' + _nested(30000) + "}",
        "invalid_input",
    ),
    ("recursion-bare", _nested(32000), "invalid_input"),
    # Parseable, but deeper than MAX_FRAME_DEPTH.
    (
        "too-deep",
        '{"type": "send", "text": "x", "clientData": {"a": ' + _nested(80) + "}}",
        "invalid_input",
    ),
    ("binary", b"\x00\x01binary", "invalid_frame"),
    ("binary-json", b'{"type": "ping"}', "invalid_frame"),
    ("oversize", json.dumps({"type": "send", "text": "x" * (70 * 1024)}), "frame_too_large"),
    ("oversize-900k", json.dumps({"type": "send", "text": "y" * (900 * 1024)}), "frame_too_large"),
    ("nul-text", '{"type": "send", "text": "a\\u0000b"}', "invalid_input"),
    ("nul-title", '{"type": "rename", "title": "\\u0000"}', "invalid_input"),
    ("nul-key", '{"type": "send", "text": "x", "clientData": {"k\\u0000": 1}}', "invalid_input"),
    (
        "nul-part",
        json.dumps(
            {
                "type": "send",
                "message": {"role": "user", "parts": [{"type": "text", "text": "\x00"}]},
            }
        ),
        "invalid_input",
    ),
    (
        "nul-action",
        '{"type": "submit-action", "actionId": "act_1", "value": {"output": "\\u0000"}}',
        "invalid_input",
    ),
    ("surrogate", '{"type": "send", "text": "\\ud800"}', "invalid_input"),
    ("unknown-command", '{"type": "launch-missiles"}', "unknown_command"),
    ("send-empty", '{"type": "send", "text": "   "}', "invalid_input"),
    ("send-text-number", '{"type": "send", "text": 5}', "invalid_input"),
    ("send-both", '{"type": "send", "text": "a", "message": {"parts": []}}', "invalid_input"),
    ("send-neither", '{"type": "send"}', "invalid_input"),
    ("send-message-string", '{"type": "send", "message": "hello"}', "invalid_input"),
    (
        "send-parts-object",
        '{"type": "send", "message": {"parts": {"type": "text"}}}',
        "invalid_input",
    ),
    (
        "send-part-type",
        '{"type": "send", "message": {"parts": [{"type": "tool-x"}]}}',
        "invalid_input",
    ),
    (
        "send-role",
        json.dumps({"type": "send", "message": {"role": "assistant", "parts": [{"type": "text"}]}}),
        "invalid_input",
    ),
    (
        "send-id-number",
        '{"type": "send", "message": {"id": 5, "parts": [{"type": "text", "text": "x"}]}}',
        "invalid_input",
    ),
    (
        "send-reserved-metadata",
        json.dumps(
            {
                "type": "send",
                "message": {"parts": [{"type": "text", "text": "x"}], "metadata": {"pai": {}}},
            }
        ),
        "invalid_input",
    ),
    ("send-client-data-list", '{"type": "send", "text": "x", "clientData": [1]}', "invalid_input"),
    ("send-policy-number", '{"type": "send", "text": "x", "policy": 3}', "invalid_input"),
    ("send-policy-unknown", '{"type": "send", "text": "x", "policy": "shove"}', "invalid_input"),
    (
        "send-attachment-missing",
        '{"type": "send", "message": {"parts": [{"type": "attachment", "fileId": "file_nope"}]}}',
        "invalid_input",
    ),
    ("rename-number", '{"type": "rename", "title": 12}', "invalid_input"),
    ("rename-long", json.dumps({"type": "rename", "title": "t" * 201}), "invalid_input"),
    ("cancel-run-number", '{"type": "cancel", "runId": 5}', "invalid_input"),
    ("cancel-idle", '{"type": "cancel"}', "invalid_input"),
    ("cancel-unknown-run", '{"type": "cancel", "runId": "run_nope"}', "not_found"),
    ("regenerate-id-number", '{"type": "regenerate", "messageId": []}', "invalid_input"),
    ("regenerate-nothing", '{"type": "regenerate"}', "invalid_input"),
    ("action-missing", '{"type": "submit-action", "value": {"approved": true}}', "invalid_input"),
    (
        "action-value-list",
        '{"type": "submit-action", "actionId": "act_1", "value": [true]}',
        "invalid_input",
    ),
    (
        "action-unknown",
        '{"type": "submit-action", "actionId": "act_nope", "value": {"approved": true}}',
        "not_found",
    ),
    ("resume-since-string", '{"type": "resume", "since": "yesterday"}', "invalid_frame"),
    ("resume-since-bool", '{"type": "resume", "since": true}', "invalid_frame"),
    ("resume-since-float", '{"type": "resume", "since": 1.5}', "invalid_frame"),
]


async def test_every_bad_frame_gets_the_typed_error_frame(server: DaphneServer) -> None:
    """Each bad frame is answered with the typed error frame and its code; the socket
    serves a ping after each; the thread's rows never change; no traceback is logged."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("echo", title="Untouched")
        before = await stored_rows(thread_id)
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            for name, payload, code in BAD_FRAMES:
                frame = await reply_to(ws, payload)
                assert_error_frame(frame, code), name
                assert not await ping(ws, f"after-{name}"), name
            # requestId is echoed whenever the frame has a usable one.
            frame = await reply_to(ws, '{"type": "send", "requestId": "r1", "text": 5}')
            assert_error_frame(frame, "invalid_input", request_id="r1")
            frame = await reply_to(ws, '{"type": "send", "requestId": 9, "text": "\\u0000"}')
            assert_error_frame(frame, "invalid_input", request_id=9)
            frame = await reply_to(ws, '{"type": "nope", "requestId": "r2"}')
            assert_error_frame(frame, "unknown_command", request_id="r2")
            assert "send" in frame["error"]["details"]["commands"]
            frame = await reply_to(ws, json.dumps({"type": "send", "text": "z" * 70000}))
            assert frame["error"]["details"]["limit"] == 65536
        after = await stored_rows(thread_id)

    assert after == before, "a refused frame stored nothing"
    assert_clean_log(server)


async def test_the_socket_still_works_after_errors(server: DaphneServer) -> None:
    """A valid send right after a run of bad frames streams and stores exactly one
    exchange (the refused ones left nothing behind)."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("echo")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            for _name, payload, _code in BAD_FRAMES[:25]:
                await ws.send(payload)
            await ws.send(json.dumps({"type": "send", "requestId": "ok", "text": "still here"}))
            frames = await recv_until(
                ws, lambda f: f["type"] == "run.status" and f["status"] == "completed"
            )
        stored = await alice.messages(thread_id)

    errors = [f for f in frames if f["type"] == "error"]
    assert len(errors) == 25
    for frame in errors:
        assert_error_frame(frame)
    ack = next(f for f in frames if f["type"] == "ack")
    assert ack["requestId"] == "ok" and ack["created"] is True
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[0]["parts"] == [{"type": "text", "text": "still here"}]
    assert_clean_log(server)


async def _pending_action(browser: Browser, thread_id: str) -> dict[str, Any]:
    sent = await browser.send(thread_id, "ask me something")
    run = await browser.wait_run(sent["run"]["id"])
    assert run["status"] == "waiting", run
    actions = (await browser.api("GET", f"/actions?thread_id={thread_id}")).json()
    (action,) = actions
    return dict(action)


async def test_another_scopes_ids_are_not_found(server: DaphneServer) -> None:
    """Scope: bob's run, pending action and message ids, used on alice's own socket, get
    exactly the frame an id that does not exist gets; bob's rows and alice's stay as they
    were, and bob's thread itself is refused like a missing one (4404)."""
    async with Browser(server) as alice, Browser(server) as bob:
        bob_thread = await bob.create_thread("toolbox", title="Bob's")
        action = await _pending_action(bob, bob_thread)
        bob_message = (await bob.messages(bob_thread))[0]["id"]
        bob_run = action["runId"]
        thread_id = await alice.create_thread("echo")
        bob_before = await stored_rows(bob_thread)
        alice_before = await stored_rows(thread_id)

        commands = [
            ({"type": "cancel", "runId": bob_run}, {"type": "cancel", "runId": "run_absent"}),
            (
                {"type": "submit-action", "actionId": action["id"], "value": {"output": "x"}},
                {"type": "submit-action", "actionId": "act_absent", "value": {"output": "x"}},
            ),
            (
                {"type": "regenerate", "messageId": bob_message},
                {"type": "regenerate", "messageId": "msg_absent"},
            ),
        ]
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            for foreign, absent in commands:
                got = await reply_to(ws, json.dumps({**foreign, "requestId": "q"}))
                missing = await reply_to(ws, json.dumps({**absent, "requestId": "q"}))
                assert_error_frame(got, "not_found", request_id="q")
                assert got == missing, "another scope's id is indistinguishable from none"
            await ping(ws)
        async with alice.websocket(bob_thread) as ws:
            refused = await recv(ws)
            with pytest.raises(ConnectionClosed) as closed:
                await recv(ws)
        bob_after = await stored_rows(bob_thread)
        alice_after = await stored_rows(thread_id)

    assert_error_frame(refused, "not_found")
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4404
    assert bob_after == bob_before
    assert alice_after == alice_before
    assert_clean_log(server)


async def test_stale_views_are_refused(server: DaphneServer) -> None:
    """A regenerate for an exchange that is no longer the latest (another tab sent or
    regenerated meanwhile) is ``stale`` and starts nothing; a second answer to a pending
    action is ``action_conflict``; a ``since`` from the future gets a fresh snapshot."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("echo")
        for text in ("first", "second"):
            sent = await alice.send(thread_id, text)
            await alice.wait_run(sent["run"]["id"])
        first_user, first_answer, _second_user, second_answer = await alice.messages(thread_id)
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            before = await stored_rows(thread_id)
            for old in (first_user["id"], first_answer["id"]):
                frame = await reply_to(ws, json.dumps({"type": "regenerate", "messageId": old}))
                assert_error_frame(frame, "stale")
            assert await stored_rows(thread_id) == before, "a stale regenerate started nothing"

            ack = await reply_to(
                ws, json.dumps({"type": "regenerate", "messageId": second_answer["id"]})
            )
            assert ack["type"] == "ack", ack
            await alice.wait_run(ack["run"]["id"])
            # The answer just replaced has left the transcript: regenerating it is stale.
            again = await reply_to(
                ws, json.dumps({"type": "regenerate", "messageId": second_answer["id"]})
            )
            assert_error_frame(again, "stale")
            current = (await alice.messages(thread_id))[-1]
            assert current["id"] != second_answer["id"]

            await ws.send(json.dumps({"type": "resume", "since": 10**18}))
            frames = await recv_until(ws, lambda f: f["type"] == "synced")
            assert frames[0]["type"] == "snapshot"
        runs = [r for r in (await stored_rows(thread_id))["runs"]]

    assert len(runs) == 3, "two sends and one regenerate: the refused ones started nothing"
    assert_clean_log(server)


async def test_a_second_answer_to_an_action_conflicts(server: DaphneServer) -> None:
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("toolbox")
        action = await _pending_action(alice, thread_id)
        answer = {"type": "submit-action", "actionId": action["id"], "value": {"output": "A"}}
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            first = await reply_to(ws, json.dumps(answer))
            before = await stored_rows(thread_id)
            second = await reply_to(ws, json.dumps({**answer, "value": {"output": "B"}}))
        await alice.wait_run(action["runId"])

    assert first["type"] == "ack", first
    assert_error_frame(second, "action_conflict")
    assert before["actions"] == [(action["id"], "submitted")]
    assert_clean_log(server)


async def test_a_frame_over_the_servers_message_limit_drops_only_that_socket(
    server: DaphneServer,
) -> None:
    """Above daphne's own message limit (``--websocket_max_message_size``, 1 MiB) the
    websocket layer drops the connection before any PAI code sees the frame: never with
    1011, nothing logged as an error, nothing stored, and a new connection works."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("echo")
        before = await stored_rows(thread_id)
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            # Daphne may close while the client is still writing the frame (the send then
            # raises) or after reading it (the next receive does): either way this socket ends.
            with pytest.raises(ConnectionClosed) as closed:
                await ws.send(json.dumps({"type": "send", "text": "z" * (2 * 1024 * 1024)}))
                await recv(ws)
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            await ping(ws)
        after = await stored_rows(thread_id)

    code = closed.value.rcvd.code if closed.value.rcvd is not None else None
    assert code != 1011
    assert after == before
    assert_clean_log(server)
