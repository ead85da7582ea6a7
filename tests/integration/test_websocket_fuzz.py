"""A bounded, deterministic fuzz of the websocket commands against a real daphne server.

Hypothesis (derandomized, a fixed number of examples) draws short sequences of frames: raw
garbage, binary, arbitrary JSON, deep nesting, and command-shaped frames whose fields mix
valid values, wrong types, NUL characters, unpaired surrogates and another scope's ids
(bob's thread, run, pending action and message). Each example opens a socket on a fresh
thread of alice's and sends its frames, each followed by a ping. It asserts: the socket is
never closed (so never with 1011), every frame received is a protocol event or the typed
error frame (never ``server_error``), the socket answers the ping after every frame, the
server logs no traceback, every stored user message belongs to a send that was
acknowledged as created (nothing stored half-way), and bob's rows never change.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed

from tests.support.realtime import recv_until, server_fixture
from tests.support.server import Browser, DaphneServer
from tests.support.ws_probe import (
    EVENT_TYPES,
    assert_clean_log,
    assert_error_frame,
    ping,
    stored_rows,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EXAMPLES = 100
FIELDS = (
    *("type", "requestId", "text", "message", "clientData", "policy", "title", "runId"),
    *("actionId", "value", "messageId", "since", "extra"),
)
COMMANDS = ["send", "rename", "cancel", "regenerate", "submit-action", "resume", "sync", "ping"]
# Error codes a client can provoke; server_error (a bug) and anything else fail the fuzz.
CLIENT_ERRORS = frozenset(
    {
        "invalid_json",
        "invalid_frame",
        "frame_too_large",
        "invalid_input",
        "unknown_command",
        "not_found",
        "stale",
        "thread_busy",
        "action_conflict",
        "payload_too_large",
        "rewrite_rejected",
        "unsupported",
    }
)


server = server_fixture("websocket-fuzz", DJANGO_SETTINGS_MODULE="tests.support.ws_settings")


# -- strategies -------------------------------------------------------------------------

TEXTS = st.one_of(
    st.sampled_from(["", " ", "hello", "\x00", "a\x00b", "\ud800", "x\udfff", "t" * 300]),
    st.text(max_size=30),
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXTS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXTS, inner, max_size=4),
    max_leaves=12,
)


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def _valid_commands(ids: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Commands as a client would send them (they may still fail: a busy thread, bob's ids)."""
    words = st.text(min_size=1, max_size=20)
    request = {"requestId": st.text(max_size=8) | st.integers(0, 10**6)}
    text_part = st.builds(lambda text: {"type": "text", "text": text}, words)
    return st.one_of(
        st.fixed_dictionaries(
            {"type": st.just("send"), "text": words},
            optional={**request, "policy": st.sampled_from(["queue", "reject", "interrupt"])},
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("send"),
                "message": st.fixed_dictionaries(
                    {"parts": st.lists(text_part, min_size=1, max_size=2)},
                    optional={"id": st.text(min_size=1, max_size=12), "metadata": st.just({})},
                ),
            },
            optional={**request, "clientData": st.just({})},
        ),
        st.fixed_dictionaries({"type": st.just("rename"), "title": words}, optional=request),
        st.fixed_dictionaries({"type": st.just("cancel")}, optional={**request, "runId": ids}),
        st.fixed_dictionaries(
            {"type": st.just("regenerate")}, optional={**request, "messageId": ids}
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("submit-action"),
                "actionId": ids,
                "value": st.fixed_dictionaries({"approved": st.booleans()})
                | st.fixed_dictionaries({"output": JSON}),
            },
            optional=request,
        ),
        st.fixed_dictionaries({"type": st.sampled_from(["resume"]), "since": st.integers()}),
        st.fixed_dictionaries({"type": st.sampled_from(["sync", "ping"])}, optional=request),
    )


def frames(foreign: list[str]) -> st.SearchStrategy[str | bytes]:
    """One websocket message: a valid command, one with a field replaced by anything, a
    command-shaped jumble, or garbage."""
    ids = st.sampled_from(foreign) | st.text(max_size=12)
    values = JSON | ids | st.integers(60, 90).map(_nested)
    valid = _valid_commands(ids)
    fields = st.sampled_from(FIELDS)
    perturbed = st.tuples(valid, fields, values).map(lambda t: {**t[0], t[1]: t[2]})
    jumble = st.dictionaries(fields, values, max_size=4).flatmap(
        lambda d: st.sampled_from(COMMANDS).map(lambda kind: {**d, "type": kind})
    )
    encoded = st.one_of(valid, valid, perturbed, perturbed, jumble).map(json.dumps)
    return st.one_of(
        encoded,
        encoded,
        encoded,
        encoded,
        encoded.flatmap(lambda s: st.integers(0, len(s)).map(lambda n: s[:n])),
        JSON.map(json.dumps),
        st.text(max_size=60),
        st.binary(max_size=40),
        st.integers(100, 20000).map(lambda depth: "[" * depth + "]" * depth),
    )


# -- one example --------------------------------------------------------------------------


def _check_frame(frame: dict[str, Any], created: set[str]) -> None:
    if frame.get("type") == "error":
        assert_error_frame(frame, request_id=frame.get("requestId"))
        assert frame["error"]["code"] in CLIENT_ERRORS, frame
        event(f"error {frame['error']['code']}")
        return
    assert frame.get("type") in EVENT_TYPES, frame
    if frame["type"] == "ack":
        assert isinstance(frame.get("command"), str), frame
        event(f"ack {frame['command']}")
        if frame["command"] == "send" and frame.get("created"):
            if frame.get("message"):
                created.add(frame["message"]["id"])
            for message in (frame.get("queued") or {}).get("messages", ()):
                created.add(message["id"])


def _settled_user_ids(thread_id: str, timeout: float = 20.0) -> set[str]:
    """Once the thread's runs have settled: the ids of its user messages and queued input."""
    from pai_threads.models import Message, QueueItem, Run

    deadline = time.monotonic() + timeout
    while Run.objects.filter(thread_id=thread_id, status__in=["queued", "running"]).exists():
        assert time.monotonic() < deadline, "runs of the fuzzed thread did not settle"
        time.sleep(0.05)
    users = Message.objects.filter(thread_id=thread_id, role="user")
    queued = QueueItem.objects.filter(thread_id=thread_id)
    return {
        *users.values_list("message_id", flat=True),
        *queued.values_list("message_id", flat=True),
    }


async def _exercise(server: DaphneServer, payloads: list[str | bytes]) -> None:
    created: set[str] = set()
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("echo")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            try:
                for index, payload in enumerate(payloads):
                    await ws.send(payload)
                    for frame in await ping(ws, f"fuzz-{index}"):
                        _check_frame(frame, created)
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else None
                raise AssertionError(f"the server closed the socket ({code})") from exc
            stored = await sync_to_async(_settled_user_ids)(thread_id)
            for frame in await ping(ws, "settled"):
                _check_frame(frame, created)
    assert stored <= created, "only acknowledged sends stored user input"
    assert_clean_log(server)


async def _foreign_scope(server: DaphneServer) -> tuple[str, list[str]]:
    """Bob's thread with a finished exchange and a run waiting on a pending action."""
    async with Browser(server) as bob:
        thread_id = await bob.create_thread("toolbox", title="Bob's")
        sent = await bob.send(thread_id, "ask me")
        run = await bob.wait_run(sent["run"]["id"])
        assert run["status"] == "waiting"
        (action,) = (await bob.api("GET", f"/actions?thread_id={thread_id}")).json()
        messages = await bob.messages(thread_id)
    return thread_id, [thread_id, run["id"], action["id"], *(m["id"] for m in messages)]


def test_websocket_commands_fuzz(server: DaphneServer) -> None:
    """Bounded and derandomized: the same examples on every run."""
    bob_thread, foreign = asyncio.run(_foreign_scope(server))
    bob_before = asyncio.run(stored_rows(bob_thread))

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def example(data: st.DataObject) -> None:
        payloads = data.draw(st.lists(frames(foreign), min_size=1, max_size=5), label="frames")
        asyncio.run(_exercise(server, payloads))

    example()
    assert asyncio.run(stored_rows(bob_thread)) == bob_before, "bob's rows never change"
