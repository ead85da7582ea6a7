"""Conformance with the real AI SDK (``ai`` 7, pinned): what ``useChat`` shows live over the
SSE endpoint equals what it shows after a reload through the loading path the docs give
(``GET /api/pai/ai-sdk/chat/<id>/messages``), which is the stored transcript (``GET
/api/pai/threads/<id>/messages``) in the one-message-per-run view, metadata included.

Live messages are compared after ``client_message``, the one projection that stored
messages go through too (ToolData and suspension records joined onto their tool parts).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from pai_agents.messages.projection import client_message
from pai_threads.ai_sdk.view import chat_messages
from tests.support.ai_sdk import ChatResult, read_ui_message_stream, run_chat_as
from tests.support.realtime import recv_until, server_fixture
from tests.support.server import Browser, DaphneServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

server = server_fixture("ai-sdk-conformance")


async def loaded(alice: Browser, thread_id: str) -> list[dict[str, Any]]:
    """useChat's initial messages after a reload, as the docs load them."""
    response = await alice.http.get(f"/api/pai/ai-sdk/chat/{thread_id}/messages")
    assert response.status_code == 200, response.text
    return list(response.json()["messages"])


def shown(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What an app renders: messages through the one client projection. A user message
    useChat made itself has no ``metadata`` (no chunk updates it; a reload brings the
    stored ``metadata.pai``), so user messages compare by id, role and parts."""
    return [
        client_message(m)
        if m["role"] == "assistant"
        else {"id": m["id"], "role": m["role"], "parts": m["parts"]}
        for m in messages
    ]


def tool_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"].startswith("tool-")]


async def converse(
    alice: Browser, agent: str, actions: list[dict[str, Any]]
) -> tuple[str, ChatResult, list[dict[str, Any]], list[dict[str, Any]]]:
    thread_id = await alice.create_thread(agent)
    result = await run_chat_as(alice, thread_id, actions)
    assert result.errors == [], result.errors
    for step in result.steps:
        assert step["status"] == "ready", step
    return thread_id, result, await loaded(alice, thread_id), await alice.messages(thread_id)


def assert_live_equals_loaded(result: ChatResult, after_reload: list[dict[str, Any]]) -> None:
    live, stored = shown(result.messages), shown(after_reload)
    assert len(live) == len(stored), (live, stored)
    for a, b in zip(live, stored, strict=True):
        assert a == b, "live != loaded:\n" + "\n".join(differences(a, b))


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ (for readable failures)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b))
        return [
            d
            for k in keys
            for d in differences(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}")
        ]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {json.dumps(a)[:300]} != {json.dumps(b)[:300]}"]


async def test_text_and_reasoning_live_equals_reload(server: DaphneServer) -> None:
    """A one-step answer: the SDK's message is the stored one, metadata.pai included."""
    async with Browser(server) as alice:
        _, result, after, stored = await converse(alice, "slow", [{"op": "send", "text": "hi"}])
    assert_live_equals_loaded(result, after)
    live = result.messages[-1]
    assert live["id"] == stored[-1]["id"]
    assert [p["type"] for p in live["parts"]] == ["step-start", "reasoning", "text"]
    pai = live["metadata"]["pai"]
    assert pai["runId"] == stored[-1]["metadata"]["pai"]["runId"]
    assert pai["status"] == "committed" and pai["usage"] and pai["diagnostics"]
    assert pai["messageIds"] == [stored[-1]["id"]]
    assert {**live["metadata"]["pai"], "messageIds": None} == {
        **stored[-1]["metadata"]["pai"],
        "messageIds": None,
    }
    assert result.finishes[-1]["finishReason"] == "stop"


async def test_multi_step_tools_show_each_call_once(server: DaphneServer) -> None:
    """A run with a tool step is one useChat message (steps split by step-start); each tool
    call shows once live, as after a reload, in every state the engine produces."""
    async with Browser(server) as alice:
        _, result, after, stored = await converse(
            alice, "toolbox", [{"op": "send", "text": "use tools"}]
        )
    assert_live_equals_loaded(result, after)
    assert [m["role"] for m in result.messages] == ["user", "assistant"]
    live = result.messages[-1]
    ids = [p["toolCallId"] for p in tool_parts(live)]
    assert len(ids) == len(set(ids)) == 3
    states = {p["state"] for p in live["parts"] if "toolCallId" in p}
    assert states == {"output-available", "output-error"}
    steps = [m for m in stored if m["role"] == "assistant"]
    assert live["id"] == steps[0]["id"]
    assert live["parts"] == [p for m in steps for p in m["parts"]]
    assert live["metadata"]["pai"]["messageIds"] == [m["id"] for m in steps]


async def test_read_ui_message_stream_of_the_sse_body_is_the_loaded_message(
    server: DaphneServer,
) -> None:
    """Every SSE chunk passes the SDK's chunk schema and the body folds, with
    readUIMessageStream, to the loaded message (the run's steps as one message)."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("toolbox")
        body = {
            "id": thread_id,
            "messages": [
                {"id": "msg_u1", "role": "user", "parts": [{"type": "text", "text": "x"}]}
            ],
        }
        response = await alice.http.post(
            "/api/pai/ai-sdk/chat", json=body, headers={"X-CSRFToken": alice.csrf}
        )
        after = await loaded(alice, thread_id)
    folded = read_ui_message_stream(response.text)
    assert folded.invalid == [] and folded.errors == [] and folded.valid
    assert shown([folded.message]) == shown(after[-1:])


@pytest.mark.parametrize("approved", [True, False])
async def test_approval_round_trip_with_add_tool_approval_response(
    server: DaphneServer, approved: bool
) -> None:
    """The approval request ends its response with ``finish``; addToolApprovalResponse
    resends automatically, the continuation joins the same message, and live equals reload
    (suspension records included)."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("toolbox")
        first = await run_chat_as(alice, thread_id, [{"op": "send", "text": "needs approval"}])
        asked = first.messages[-1]
        assert first.finishes == [
            {
                "messageId": asked["id"],
                "isAbort": False,
                "isDisconnect": False,
                "isError": False,
                "finishReason": "tool-calls",
            }
        ]
        assert shown(first.messages) == shown(await loaded(alice, thread_id))
        [part] = shown([asked])[0]["parts"][-1:]
        assert part["state"] == "approval-requested"
        assert part["pendingSuspension"]["kind"] == "approval"

        second = await run_chat_as(
            alice,
            thread_id,
            [{"op": "approve", "approved": approved}],
            messages=first.messages,
        )
        after = await loaded(alice, thread_id)
    assert second.errors == []
    assert_live_equals_loaded(second, after)
    live = shown(second.messages)[-1]
    assert live["id"] == asked["id"]
    [transfer] = tool_parts(live)
    assert transfer["state"] == ("output-available" if approved else "output-denied")
    assert transfer["approval"]["approved"] is approved
    assert transfer["pendingSuspension"] is None
    assert transfer["suspensions"][0]["status"] != "pending"


async def test_client_tool_round_trip_with_add_tool_output(server: DaphneServer) -> None:
    """A client tool waits; addToolOutput resends automatically, the server takes the output
    as the pending action's answer, and the run goes on in the same message."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("toolbox")
        first = await run_chat_as(alice, thread_id, [{"op": "send", "text": "ask me"}])
        assert [c["toolName"] for c in first.tool_calls] == ["ask_user"]
        assert first.finishes[-1]["finishReason"] == "tool-calls"
        assert shown(first.messages) == shown(await loaded(alice, thread_id))
        second = await run_chat_as(
            alice,
            thread_id,
            [{"op": "toolOutput", "output": {"answer": "the blue one"}}],
            messages=first.messages,
        )
        after = await loaded(alice, thread_id)
    assert second.errors == []
    assert_live_equals_loaded(second, after)
    live = shown(second.messages)[-1]
    [ask] = tool_parts(live)
    assert ask["state"] == "output-available" and ask["output"] == {"answer": "the blue one"}
    assert live["parts"][-1]["text"] == "All tools have reported back."


async def test_tool_data_live_equals_reload(server: DaphneServer) -> None:
    """ToolData records stream as data parts; through the one projection they are the
    loaded tool part's ``data[channel]`` (transient records live only, via onData)."""
    async with Browser(server) as alice:
        _, result, after, _ = await converse(alice, "reporter", [{"op": "send", "text": "go"}])
    assert_live_equals_loaded(result, after)
    [report] = tool_parts(shown(result.messages)[-1])
    assert report["data"] == {
        "progress": [{"id": "main", "value": {"pct": 100}}],
        "log": [{"id": report["data"]["log"][0]["id"], "value": "finished"}],
    }
    assert any(d.get("transient") for d in result.data)


async def test_regenerate_replaces_the_answer_live_and_after_reload(
    server: DaphneServer,
) -> None:
    async with Browser(server) as alice:
        _, result, after, _ = await converse(
            alice, "toolbox", [{"op": "send", "text": "use tools"}, {"op": "regenerate"}]
        )
    assert_live_equals_loaded(result, after)
    assert [m["role"] for m in result.messages] == ["user", "assistant"]
    first_answer = result.steps[0]["messages"][-1]["id"]
    assert result.messages[-1]["id"] != first_answer


async def test_resume_after_a_reload_mid_run(server: DaphneServer) -> None:
    """A reload mid-generation: useChat loads the view (the streaming step left out) and
    resumes; the resumed message equals the stored one."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        first = await run_chat_as(
            alice, thread_id, [{"op": "sendAndStop", "text": "a long one", "afterChunks": 8}]
        )
        assert first.finishes[-1]["isAbort"] is True
        reloaded = await loaded(alice, thread_id)
        assert [m["role"] for m in reloaded] == ["user"]
        resumed = await run_chat_as(alice, thread_id, [{"op": "resume"}], messages=reloaded)
        after = await loaded(alice, thread_id)
    assert resumed.errors == []
    assert_live_equals_loaded(resumed, after)
    assert after[-1]["metadata"]["pai"]["status"] == "committed"


async def test_stop_then_cancel_endpoint_ends_the_run(server: DaphneServer) -> None:
    """chat.stop() only aborts the fetch; the transport's cancel endpoint ends the run."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        result = await run_chat_as(
            alice,
            thread_id,
            [
                {"op": "sendAndStop", "text": "a long one", "afterChunks": 4},
                {
                    "op": "fetch",
                    "method": "POST",
                    "path": f"/api/pai/ai-sdk/chat/{thread_id}/cancel",
                },
            ],
        )
        cancel = result.steps[1]["http"]
        assert cancel["status"] == 200, cancel
        run = await alice.wait_run(cancel["body"]["run"]["id"])
        again = await alice.http.post(
            f"/api/pai/ai-sdk/chat/{thread_id}/cancel", headers={"X-CSRFToken": alice.csrf}
        )
    assert run["status"] == "cancelled"
    assert again.json() == {"run": None}


async def test_loading_view_groups_each_run(server: DaphneServer) -> None:
    """The view is the stored transcript with each run's steps merged, nothing else."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("toolbox")
        await run_chat_as(
            alice, thread_id, [{"op": "send", "text": "use tools"}, {"op": "send", "text": "x"}]
        )
        stored = await alice.messages(thread_id)
        view = await loaded(alice, thread_id)
    assert view == chat_messages(stored)
    assert [m["role"] for m in view] == ["user", "assistant", "user", "assistant"]


async def test_steering_stays_in_the_run_message_live_and_after_reload(
    server: DaphneServer, tmp_path: Path
) -> None:
    """A message steered into the run while its tool runs (another client's send, policy
    ``steer``) is stored between the run's steps; useChat shows it inside the run's one
    message as a ``steering-message`` part, live and after a reload (the loading view no
    longer splits the run in two)."""
    gate = tmp_path / "go"
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("reporter")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            chat = asyncio.create_task(
                run_chat_as(alice, thread_id, [{"op": "send", "text": f"report {gate}"}])
            )
            await recv_until(
                ws,
                lambda f: (
                    f["type"] == "generation.message.chunk"
                    and f["chunk"]["type"] == "data-pai-tool-data"
                ),
            )
            steer = await alice.api(
                "POST", f"/threads/{thread_id}/messages", {"text": "also this", "policy": "steer"}
            )
            assert steer.status_code == 202, steer.text
            gate.touch()
            result = await chat
        after = await loaded(alice, thread_id)
        stored = await alice.messages(thread_id)
    assert result.errors == [], result.errors
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant", "assistant"]
    assert_live_equals_loaded(result, after)
    assert [m["role"] for m in after] == ["user", "assistant"]
    [steering] = [p for p in after[-1]["parts"] if p["type"] == "steering-message"]
    assert steering == {
        "type": "steering-message",
        "id": stored[2]["id"],
        "parts": [{"type": "text", "text": "also this"}],
    }
    assert after[-1]["metadata"]["pai"]["messageIds"] == [
        m["id"] for m in stored if m["role"] == "assistant"
    ]
