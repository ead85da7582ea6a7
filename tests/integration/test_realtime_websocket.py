"""The thread websocket against a real daphne server on loopback, with real clients.

The server runs the test agents (``tests.support.agents``) on the in-process executor and
writes pytest-django's test database, so tests compare what clients folded with stored rows.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from pai_agents.messages.chunks import validate_chunk
from pai_agents.messages.projection import client_message
from pai_agents.messages.reducer import reduce_chunks
from tests.support.agents import slow_answer
from tests.support.realtime import recv, recv_until, server_fixture
from tests.support.server import Browser, DaphneServer
from tests.support.thread_state import ThreadState

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


server = server_fixture("realtime-websocket")


def run_ended(run_id: str | None = None) -> Any:
    def done(frame: dict[str, Any]) -> bool:
        return (
            frame["type"] == "run.status"
            and frame["status"] not in ("queued", "running")
            and (run_id is None or frame["runId"] == run_id)
        )

    return done


def chunk_events(frames: list[dict[str, Any]], message_id: str) -> list[dict[str, Any]]:
    return [
        f
        for f in frames
        if f["type"] == "generation.message.chunk" and f["messageId"] == message_id
    ]


async def test_snapshot_on_connect(server: DaphneServer) -> None:
    """LC-030, AD-034: the snapshot has the head, transcript, public runs, queue, actions."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow", title="Snapshot test")
        sent = await alice.send(thread_id, "hello")
        await alice.wait_run(sent["run"]["id"])
        stored = await alice.messages(thread_id)

        async with alice.websocket(thread_id) as ws:
            snapshot = await recv(ws)
            synced = await recv(ws)

    assert snapshot["type"] == "snapshot"
    assert isinstance(snapshot["seq"], int)
    assert synced == {"type": "synced", "seq": snapshot["seq"]}
    state = snapshot["state"]
    assert state["thread"]["id"] == thread_id
    assert state["thread"]["title"] == "Snapshot test"
    assert "privateMetadata" not in state["thread"]
    assert state["messages"] == stored
    assert [m["role"] for m in state["messages"]] == ["user", "assistant"]
    assert state["queue"] == {"items": []}
    assert state["pendingActions"] == []
    (run,) = state["runs"]
    assert run["id"] == sent["run"]["id"]
    assert run["status"] == "completed"
    for private in ("identity", "clientData", "privateMetadata", "leaseOwner"):
        assert private not in run
    assert "private" not in json.dumps(snapshot).lower()


async def test_mf_026_live_chunks_in_order(server: DaphneServer) -> None:
    """MF-026, MF-027, LC-106: a send over the socket streams sequenced native chunks, in
    order, and folding them gives exactly the stored message."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            await ws.send(json.dumps({"type": "send", "requestId": "r1", "text": "stream me"}))
            frames = await recv_until(ws, run_ended())
        stored = await alice.messages(thread_id)

    ack = next(f for f in frames if f["type"] == "ack")
    assert ack["requestId"] == "r1" and ack["created"] is True
    events = [f for f in frames if "seq" in f]
    seqs = [f["seq"] for f in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "no gap, no duplicate"
    kinds = [f["type"] for f in events]
    assert kinds.index("message.committed") < kinds.index("generation.started")
    started = next(f for f in events if f["type"] == "generation.started")
    chunks = chunk_events(events, started["messageId"])
    assert [c["index"] for c in chunks] == list(range(len(chunks)))
    assert [c["chunk"]["type"] for c in chunks[:2]] == ["start", "start-step"]
    finish = chunks[-1]["chunk"]  # held until stored: it carries the stored metadata
    assert {**finish, "messageMetadata": None} == {
        "type": "finish",
        "finishReason": "stop",
        "messageMetadata": None,
    }
    assert sum(c["chunk"]["type"] == "text-delta" for c in chunks) > 10
    for chunk in chunks:
        validate_chunk(chunk["chunk"])
    finished = next(f for f in events if f["type"] == "generation.finished")
    assert finish["messageMetadata"] == finished["message"]["metadata"]
    assert kinds[-1] == "run.status"

    user, assistant = stored
    assert user["parts"] == [{"type": "text", "text": "stream me"}]
    assert finished["message"] == assistant
    assert assistant["metadata"]["pai"]["status"] == "committed"
    assert assistant["metadata"]["pai"]["runId"] == ack["run"]["id"]
    folded = reduce_chunks([c["chunk"] for c in chunks])
    assert folded["id"] == assistant["id"]
    assert folded["parts"] == assistant["parts"]
    text = next(p for p in assistant["parts"] if p["type"] == "text")
    assert text["text"] == slow_answer("stream me")


@pytest.mark.parametrize("resume", [True, False], ids=["since", "fresh"])
async def test_mf_028_reconnect_mid_generation(server: DaphneServer, resume: bool) -> None:
    """MF-028: a client that drops mid-generation and reconnects (with its last sequence
    number, or fresh) gets the open message reset and rebuilt from index 0, then the live
    rest: no gap, no duplicate, and the final message equals the stored one."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        state = ThreadState()
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced", sink=state.apply)
            await ws.send(json.dumps({"type": "send", "text": "please answer long"}))
            first = await recv_until(
                ws,
                lambda f: f["type"] == "generation.message.chunk" and f["index"] >= 15,
                sink=state.apply,
            )
        started = next(f for f in first if f["type"] == "generation.started")
        message_id = started["messageId"]
        partial = next(m for m in state.messages if m["id"] == message_id)
        assert partial["parts"], "the open message is visible while it streams (MF-025)"

        await asyncio.sleep(0.3)  # chunks keep coming while the client is away
        async with alice.websocket(thread_id, since=state.seq if resume else None) as ws:
            second = await recv_until(ws, run_ended(), sink=state.apply)
        stored = await alice.messages(thread_id)

    assert second[0]["type"] == ("resumed" if resume else "snapshot")
    replay = [f for f in second if f.get("replay")]
    assert replay[0]["type"] == "generation.started"
    replayed = [f["index"] for f in replay[1:]]
    assert replayed == list(range(len(replayed))), "replay restarts at index 0"
    assert len(replayed) > 15
    live = [f["index"] for f in chunk_events(second, message_id) if not f.get("replay")]
    assert live == list(range(len(replayed), len(replayed) + len(live))), "live continues"
    assert live, "the generation was still streaming at reconnect"
    assert state.transcript() == _without_times(stored)
    assert stored[-1]["parts"][-1]["text"] == slow_answer("please answer long")


def _without_times(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = json.loads(json.dumps(messages))
    for message in out:
        message["metadata"]["pai"].pop("createdAt", None)
        message["metadata"]["pai"].pop("updatedAt", None)
    return out


async def test_reconnect_just_after_generation_finished(server: DaphneServer) -> None:
    """A client that left mid-generation and returns after it finished gets the committed
    message once: never empty, never twice (both resume paths)."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        state = ThreadState()
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced", sink=state.apply)
            await ws.send(json.dumps({"type": "send", "text": "short one"}))
            frames = await recv_until(
                ws,
                lambda f: f["type"] == "generation.message.chunk" and f["index"] >= 5,
                sink=state.apply,
            )
        run_id = next(f for f in frames if f["type"] == "ack")["run"]["id"]
        await alice.wait_run(run_id)
        stored = _without_times(await alice.messages(thread_id))

        fresh = ThreadState()
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced", sink=fresh.apply)
        async with alice.websocket(thread_id, since=state.seq) as ws:
            resumed = await recv_until(ws, lambda f: f["type"] == "synced", sink=state.apply)

    assert resumed[0]["type"] == "resumed"
    assert not [f for f in resumed if f.get("replay")], "a finished generation is not replayed"
    assert fresh.transcript() == stored
    assert state.transcript() == stored
    assert [m["role"] for m in state.messages] == ["user", "assistant"]


async def test_two_clients_see_identical_final_state(server: DaphneServer) -> None:
    """Two tabs on one thread (one sends, one watches) end with the same state, equal to
    the stored transcript; a rename from one reaches both."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("toolbox")
        states = [ThreadState(), ThreadState()]
        async with alice.websocket(thread_id) as one, alice.websocket(thread_id) as two:
            for ws, state in zip((one, two), states, strict=True):
                await recv_until(ws, lambda f: f["type"] == "synced", sink=state.apply)
            await one.send(json.dumps({"type": "send", "text": "use your tools"}))
            await one.send(json.dumps({"type": "rename", "title": "  Tools   galore "}))
            for ws, state in zip((one, two), states, strict=True):
                await recv_until(ws, run_ended(), sink=state.apply)
                if not any(f["type"] == "thread.updated" for f in state.frames):
                    await recv_until(ws, lambda f: f["type"] == "thread.updated", sink=state.apply)
        stored = _without_times(await alice.messages(thread_id))

    assert states[0].transcript() == states[1].transcript() == stored
    assert states[0].thread == states[1].thread
    assert states[0].thread is not None and states[0].thread["title"] == "Tools galore"
    assert [run["status"] for run in states[1].runs.values()] == ["completed"]


async def test_another_identitys_thread_is_refused_like_a_missing_one(
    server: DaphneServer,
) -> None:
    """Scope: bob gets the same error frame and close code for alice's thread as for a
    thread that does not exist."""
    async with Browser(server) as alice, Browser(server) as bob:
        thread_id = await alice.create_thread("slow")
        await bob.create_thread("slow")  # bob has a session too
        outcomes = []
        for target in (thread_id, "thr_doesnotexist"):
            async with bob.websocket(target) as ws:
                frame = await recv(ws)
                with pytest.raises(ConnectionClosed) as closed:
                    await recv(ws)
            assert closed.value.rcvd is not None
            outcomes.append((frame, closed.value.rcvd.code))

    assert outcomes[0] == outcomes[1]
    frame, code = outcomes[0]
    assert frame["type"] == "error" and code == 4404
    assert frame["error"] == {"code": "not_found", "message": "thread not found"}


async def test_no_session_is_unauthenticated(server: DaphneServer) -> None:
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        alice.http.cookies.clear()
        async with alice.websocket(thread_id) as ws:
            frame = await recv(ws)
            with pytest.raises(ConnectionClosed) as closed:
                await recv(ws)
    assert frame["code"] == "unauthenticated"
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


async def test_garbage_and_oversized_frames_get_typed_errors(server: DaphneServer) -> None:
    """Bad frames each get a clear, typed error; the connection and the thread survive and
    a valid command right after works."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            cases: list[tuple[str | bytes, str]] = [
                ("{not json", "invalid_json"),
                ("[1, 2]", "invalid_frame"),
                ('{"type": 7}', "invalid_frame"),
                ('{"type": "launch-missiles"}', "unknown_command"),
                (json.dumps({"type": "send", "text": "x" * (70 * 1024)}), "frame_too_large"),
                (b"\x00\x01binary", "invalid_frame"),
                ('{"type": "send", "text": ""}', "invalid_input"),
                ('{"type": "rename", "title": 12}', "invalid_input"),
                ('{"type": "resume", "since": "yesterday"}', "invalid_frame"),
            ]
            for payload, code in cases:
                await ws.send(payload)
                frame = await recv(ws)
                assert frame["type"] == "error", (payload[:40], frame)
                assert frame["code"] == code, (payload[:40], frame)
                assert frame["message"]
            await ws.send('{"type": "ping", "requestId": "p"}')
            assert (await recv(ws))["type"] == "pong"
            await ws.send(json.dumps({"type": "send", "requestId": "ok", "text": "still here"}))
            frames = await recv_until(ws, run_ended())
        stored = await alice.messages(thread_id)

    assert next(f for f in frames if f["type"] == "ack")["requestId"] == "ok"
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[0]["parts"][0]["text"] == "still here"


async def test_mf_027_replay_of_every_tool_state_equals_the_stored_messages(
    server: DaphneServer,
) -> None:
    """MF-027, MF-032: folding each generation's published chunks rebuilds the stored
    message for text, reasoning and tools in every state the engine produces (output,
    output-error, input errors static and dynamic, and a client tool left input-available)."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("toolbox")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            await ws.send(json.dumps({"type": "send", "text": "use tools"}))
            frames = await recv_until(ws, run_ended())
            await ws.send(json.dumps({"type": "send", "text": "ask me"}))
            frames += await recv_until(ws, run_ended())
        stored = {m["id"]: m for m in await alice.messages(thread_id)}

    started = [f["messageId"] for f in frames if f["type"] == "generation.started"]
    assert len(started) == 3
    states: set[str] = set()
    for message_id in started:
        chunks = [c["chunk"] for c in chunk_events(frames, message_id)]
        for chunk in chunks:
            validate_chunk(chunk)
        # The client tool's suspension records stream as data-pai-suspension chunks that
        # the one projection joins onto its part (MF-012, MF-023), as the stored one is.
        folded = client_message(reduce_chunks(chunks))
        assert folded["parts"] == stored[message_id]["parts"]
        assert folded["metadata"] == stored[message_id]["metadata"]
        states |= {p["state"] for p in folded["parts"] if "toolCallId" in p}
    assert states == {"output-available", "output-error", "input-available"}
    kinds = {p["type"] for m in stored.values() for p in m["parts"]}
    assert {"reasoning", "text", "step-start", "tool-add", "tool-boom", "dynamic-tool"} <= kinds


def _pai_chat_jsonl(text: str) -> list[dict[str, Any]]:
    import io

    from django.core.management import call_command
    from django.db import connection

    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("pai_chat", text, "--jsonl", "--scope", "cli:compare", stdout=out, stderr=err)
    finally:
        connection.close()  # this helper runs in a throwaway thread
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return [line for line in lines if "role" not in line]


async def test_pai_chat_jsonl_and_websocket_emit_the_same_chunks(
    server: DaphneServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same run of the demo agent yields the same chunk sequence on both surfaces
    (per-run ids normalised). Both put each step's stored metadata on its ``finish`` (for
    SDK readers; its timestamps and ids differ between the two runs)."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    from tests.support.thread_state import normalise_ids

    terminal = await asyncio.to_thread(_pai_chat_jsonl, "what is 6*7?")
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("assistant")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            await ws.send(json.dumps({"type": "send", "text": "what is 6*7?"}))
            frames = await recv_until(ws, run_ended())
    websocket = [f["chunk"] for f in frames if f["type"] == "generation.message.chunk"]

    assert len(websocket) > 10
    for chunks in (terminal, websocket):
        finishes = [c for c in chunks if c["type"] == "finish"]
        assert finishes and all(c["messageMetadata"]["pai"]["runId"] for c in finishes)

    def plain(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in c.items() if k != "messageMetadata"} for c in chunks]

    assert normalise_ids(plain(websocket)) == normalise_ids(plain(terminal))


async def test_http_rename_reaches_subscribers(server: DaphneServer) -> None:
    """PATCH /threads/{id} renames, and the websocket sees ``thread.updated``."""
    async with Browser(server) as alice, Browser(server) as bob:
        thread_id = await alice.create_thread("slow", title="Old")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            response = await alice.api("PATCH", f"/threads/{thread_id}", {"title": "New name"})
            assert response.status_code == 200 and response.json()["title"] == "New name"
            frame = await recv(ws)
        await bob.create_thread("slow")
        foreign = await bob.api("PATCH", f"/threads/{thread_id}", {"title": "Mine"})
    assert frame["type"] == "thread.updated"
    assert frame["thread"]["title"] == "New name"
    assert foreign.status_code == 404
