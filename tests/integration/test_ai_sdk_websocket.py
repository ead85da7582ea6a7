"""The thread websocket through the real AI SDK (``ai`` 7, pinned): each generation's
``generation.message.chunk`` frames, folded with the SDK's ``readUIMessageStream`` (after its
chunk schema), rebuild exactly the stored message, metadata included (``metadata.pai``:
runId, status, usage, diagnostics).

A step's ``finish`` carries the stored public metadata and follows the step's
``data-pai-suspension`` records (the publisher holds it until the message is stored, as
``pai_chat --jsonl`` does). Folded messages are compared after ``client_message``, the one
projection stored messages go through too (ToolData and suspension records joined onto
their tool parts); each generation equals the message its ``generation.finished`` carries,
and the last fold of each message equals the stored transcript.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection

from pai_agents.messages.projection import client_message
from tests.support.ai_sdk import WebsocketView, fold_websocket
from tests.support.realtime import recv_until, server_fixture
from tests.support.server import Browser, DaphneServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

server = server_fixture("ai-sdk-websocket")

Frame = dict[str, Any]


def run_ended(frame: Frame) -> bool:
    return frame["type"] == "run.status" and frame["status"] not in ("queued", "running")


def waiting_for_action(frame: Frame) -> bool:
    return frame["type"] == "actions.changed" and bool(frame["pendingActions"])


async def send(ws: ClientConnection, text: str, done: Callable[[Frame], bool]) -> list[Frame]:
    await ws.send(json.dumps({"type": "send", "text": text}))
    return await recv_until(ws, done)


def assert_rebuilt(view: WebsocketView, stored: list[Frame]) -> None:
    """Every generation passes the SDK's schema and reducer and folds to the message its
    generation.finished carries; the client's last state of each message is the stored
    one."""
    assert view.folds
    for fold in view.folds:
        assert fold.result.invalid == [] and fold.result.errors == [], fold.result
        assert fold.result.valid, fold.result.validation_error
        assert fold.finished is not None and fold.finished["message"] is not None
        assert client_message(fold.message) == fold.finished["message"]
        assert fold.message["metadata"] == fold.finished["message"]["metadata"]
    by_id = {m["id"]: m for m in stored}
    for fold in view.folds:
        assert client_message(view.messages[fold.message_id]) == by_id[fold.message_id]


def assert_finish_carries_the_stored_metadata(view: WebsocketView) -> None:
    """The one finish of each generation is its last chunk and carries the stored metadata
    (metadata.pai included)."""
    for fold in view.folds:
        [finish] = [c for c in fold.chunks if c["type"] == "finish"]
        assert fold.chunks[-1] == finish
        assert fold.finished is not None
        stored = fold.finished["message"]["metadata"]
        assert finish["messageMetadata"] == stored
        assert stored["pai"]["runId"] and stored["pai"]["status"] == "committed"


async def converse(alice: Browser, agent: str, text: str) -> tuple[str, list[Frame], WebsocketView]:
    thread_id = await alice.create_thread(agent)
    async with alice.websocket(thread_id) as ws:
        await recv_until(ws, lambda f: f["type"] == "synced")
        frames = await send(ws, text, run_ended)
    return thread_id, frames, fold_websocket(frames)


async def answer_action(
    alice: Browser, text: str, value: dict[str, Any]
) -> tuple[list[Frame], list[Frame], list[Frame]]:
    """Send ``text`` to the toolbox agent, answer its pending action with ``submit-action``:
    the frames up to the wait, those after the answer, and the stored transcript."""
    thread_id = await alice.create_thread("toolbox")
    async with alice.websocket(thread_id) as ws:
        await recv_until(ws, lambda f: f["type"] == "synced")
        asked = await send(ws, text, waiting_for_action)
        (action,) = asked[-1]["pendingActions"]
        answer = {"type": "submit-action", "actionId": action["id"], "value": value}
        await ws.send(json.dumps(answer))
        answered = await recv_until(ws, run_ended)
    return asked, answered, await alice.messages(thread_id)


async def test_text_and_reasoning_rebuild_the_stored_message(server: DaphneServer) -> None:
    async with Browser(server) as alice:
        thread_id, frames, view = await converse(alice, "slow", "hi")
        stored = await alice.messages(thread_id)
    assert_rebuilt(view, stored)
    assert_finish_carries_the_stored_metadata(view)
    [fold] = view.folds
    assert [p["type"] for p in fold.message["parts"]] == ["step-start", "reasoning", "text"]
    pai = fold.message["metadata"]["pai"]
    assert pai["usage"] and pai["diagnostics"]["finishReason"] == "stop"
    # The finish goes out just before generation.finished, nothing of the step after it.
    kinds = [f["type"] for f in frames]
    finished = kinds.index("generation.finished")
    assert frames[finished - 1]["chunk"]["type"] == "finish"


async def test_tools_in_every_final_state_rebuild_each_step(server: DaphneServer) -> None:
    """A tool step (results ok, a tool error, invalid input, an unknown tool) and the
    answer after it: two generations, each folding to its stored step."""
    async with Browser(server) as alice:
        thread_id, _, view = await converse(alice, "toolbox", "use tools")
        stored = await alice.messages(thread_id)
    assert_rebuilt(view, stored)
    assert_finish_carries_the_stored_metadata(view)
    assert len(view.folds) == 2 and not any(f.continued for f in view.folds)
    states = [p["state"] for p in view.folds[0].message["parts"] if "toolCallId" in p]
    assert set(states) == {"output-available", "output-error"} and len(states) == 4


@pytest.mark.parametrize("approved", [True, False])
async def test_approval_waits_then_the_continuation_rebuilds_it(
    server: DaphneServer, approved: bool
) -> None:
    """The waiting step gets a finish too (tool-calls), with its suspension record; the
    continuation after ``submit-action`` folds onto what the client holds, answer
    included, and the final answer is a generation of its own."""
    async with Browser(server) as alice:
        asked, answered, stored = await answer_action(
            alice, "needs approval", {"approved": approved}
        )
    [waiting] = fold_websocket(asked).folds
    [finish] = [c for c in waiting.chunks if c["type"] == "finish"]
    assert finish["finishReason"] == "tool-calls"
    [part] = [p for p in client_message(waiting.message)["parts"] if "toolCallId" in p]
    assert part["state"] == "approval-requested"
    assert part["pendingSuspension"]["kind"] == "approval"

    view = fold_websocket(asked + answered)
    assert_rebuilt(view, stored)
    assert_finish_carries_the_stored_metadata(view)
    assert [f.continued for f in view.folds] == [False, True, False]
    continuation = view.folds[1]
    assert continuation.message_id == waiting.message_id
    [transfer] = [p for p in client_message(continuation.message)["parts"] if "toolCallId" in p]
    assert transfer["state"] == ("output-available" if approved else "output-denied")
    assert transfer["approval"]["approved"] is approved
    assert transfer["pendingSuspension"] is None


async def test_client_tool_waits_then_its_output_joins_the_message(
    server: DaphneServer,
) -> None:
    async with Browser(server) as alice:
        value = {"output": {"answer": "the blue one"}}
        asked, answered, stored = await answer_action(alice, "ask me", value)
    [waiting] = fold_websocket(asked).folds
    [part] = [p for p in client_message(waiting.message)["parts"] if "toolCallId" in p]
    assert part["state"] == "input-available" and part["pendingSuspension"]["kind"] == "client"
    view = fold_websocket(asked + answered)
    assert_rebuilt(view, stored)
    assert_finish_carries_the_stored_metadata(view)
    # The answer is written into the stored step: message.committed brings it whole.
    answered_step = view.messages[waiting.message_id]
    [ask] = [p for p in client_message(answered_step)["parts"] if "toolCallId" in p]
    assert ask["state"] == "output-available" and ask["output"] == {"answer": "the blue one"}


async def test_tool_data_rebuilds_the_projected_records(server: DaphneServer) -> None:
    """ToolData records stream as data parts; through the one projection they are the
    stored tool part's ``data[channel]`` (the transient preview is not stored)."""
    async with Browser(server) as alice:
        thread_id, _, view = await converse(alice, "reporter", "go")
        stored = await alice.messages(thread_id)
    assert_rebuilt(view, stored)
    [report] = [p for p in client_message(view.folds[0].message)["parts"] if "toolCallId" in p]
    assert report["data"]["progress"] == [{"id": "main", "value": {"pct": 100}}]
    assert "preview" not in report["data"]


async def test_regenerate_rebuilds_the_new_answer(server: DaphneServer) -> None:
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("toolbox")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            first = await send(ws, "use tools", run_ended)
            await ws.send(json.dumps({"type": "regenerate"}))
            again = await recv_until(ws, run_ended)
        stored = await alice.messages(thread_id)
    old = {f.message_id for f in fold_websocket(first).folds}
    view = fold_websocket(again)
    assert_rebuilt(view, stored)
    assert_finish_carries_the_stored_metadata(view)
    assert old.isdisjoint(f.message_id for f in view.folds)
    assert [m["role"] for m in stored] == ["user", "assistant", "assistant"]


async def test_resume_replays_the_generation_from_its_first_chunk(server: DaphneServer) -> None:
    """A client that reconnects mid-generation (``?since=``) gets the generation replayed
    from index 0, then live: folded, it is the stored message."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        async with alice.websocket(thread_id) as ws:
            synced = await recv_until(ws, lambda f: f["type"] == "synced")
            seen = await send(
                ws,
                "a long one",
                lambda f: (
                    f["type"] == "generation.message.chunk" and f["chunk"]["type"] == "text-delta"
                ),
            )
        last_seq = max(f["seq"] for f in synced + seen if isinstance(f.get("seq"), int))
        async with alice.websocket(thread_id, since=last_seq) as ws:
            resumed = await recv_until(ws, run_ended)
        stored = await alice.messages(thread_id)
    assert any(f.get("replay") for f in resumed)
    view = fold_websocket(resumed)
    assert_rebuilt(view, stored)
    assert_finish_carries_the_stored_metadata(view)
