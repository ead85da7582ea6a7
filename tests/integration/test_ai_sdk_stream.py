"""The AI SDK UI-message SSE endpoint against a real daphne server, with a real HTTP client."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest

from pai_agents.messages.chunks import validate_chunk
from pai_agents.messages.reducer import reduce_chunks
from tests.support.realtime import server_fixture
from tests.support.server import Browser, DaphneServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


server = server_fixture("ai-sdk")


def user_message(text: str) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:12]}",
        "role": "user",
        "parts": [{"type": "text", "text": text}],
    }


async def read_sse(response: httpx.Response, limit: int | None = None) -> tuple[list[Any], bool]:
    """Chunks of an SSE body and whether ``[DONE]`` ended it (stops early at ``limit``)."""
    chunks: list[Any] = []
    async for line in response.aiter_lines():
        if not line.startswith("data: "):
            continue
        data = line[len("data: ") :]
        if data == "[DONE]":
            return chunks, True
        chunks.append(json.loads(data))
        if limit is not None and len(chunks) >= limit:
            return chunks, False
    return chunks, False


def per_message(chunks: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    groups: list[list[dict[str, Any]]] = []
    for chunk in chunks:
        if chunk["type"] == "start":
            groups.append([])
        groups[-1].append(chunk)
    return groups


async def chat(alice: Browser, body: dict[str, Any]) -> httpx.Response:
    request = alice.http.build_request(
        "POST", "/api/pai/ai-sdk/chat", json=body, headers={"X-CSRFToken": alice.csrf}
    )
    return await alice.http.send(request, stream=True)


async def test_post_streams_the_run_as_ui_message_chunks(server: DaphneServer) -> None:
    """useChat's DefaultChatTransport body in, the run's chunks out: each validates against
    the SDK schema, the run is ONE client message (one start with the first step's stored
    id, each later step joining it with start-step, one finish; useChat appends a response
    to one message), and folding it gives the stored steps' parts in order, each step's
    stored metadata merged in by a message-metadata chunk."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("toolbox")
        body = {
            "id": thread_id,
            "messages": [user_message("use tools")],
            "trigger": "submit-message",
        }
        response = await chat(alice, body)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        chunks, done = await read_sse(response)
        await response.aclose()
        stored = await alice.messages(thread_id)

    assert done
    for chunk in chunks:
        validate_chunk(chunk)
    assistant = [m for m in stored if m["role"] == "assistant"]
    assert len(assistant) == 2
    assert [c for c in chunks if c["type"] == "start"] == [
        {"type": "start", "messageId": assistant[0]["id"]}
    ]
    assert [c["type"] for c in chunks].count("finish") == 1
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
    metadata = [c["messageMetadata"] for c in chunks if c["type"] == "message-metadata"]
    assert [m["pai"]["messageIds"] for m in metadata] == [
        [assistant[0]["id"]],
        [assistant[0]["id"], assistant[1]["id"]],
    ]
    folded = reduce_chunks(chunks)
    assert folded["parts"] == [p for m in assistant for p in m["parts"]]
    assert folded["metadata"]["pai"]["usage"] == assistant[1]["metadata"]["pai"]["usage"]
    assert stored[0]["id"] == body["messages"][0]["id"], "the client's message id is kept"


async def test_resend_of_the_same_message_is_idempotent(server: DaphneServer) -> None:
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        body = {"id": thread_id, "messages": [user_message("once")], "trigger": "submit-message"}
        first = await chat(alice, body)
        await read_sse(first)
        await first.aclose()
        again = await chat(alice, body)
        chunks, done = await read_sse(again)
        await again.aclose()
        stored = await alice.messages(thread_id)
    assert done and chunks == []
    assert [m["role"] for m in stored] == ["user", "assistant"]


async def test_resume_mid_stream_and_204_when_idle(server: DaphneServer) -> None:
    """GET .../stream replays the active generation from its first chunk then follows it
    live; with nothing streaming it answers 204."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        idle = await alice.http.get(f"/api/pai/ai-sdk/chat/{thread_id}/stream")
        assert idle.status_code == 204

        body = {
            "id": thread_id,
            "messages": [user_message("a long one")],
            "trigger": "submit-message",
        }
        response = await chat(alice, body)
        early, _ = await read_sse(response, limit=12)
        await response.aclose()  # the browser reloads mid-generation

        await asyncio.sleep(0.2)
        request = alice.http.build_request("GET", f"/api/pai/ai-sdk/chat/{thread_id}/stream")
        resumed = await alice.http.send(request, stream=True)
        assert resumed.status_code == 200
        chunks, done = await read_sse(resumed)
        await resumed.aclose()
        stored = await alice.messages(thread_id)
        after = await alice.http.get(f"/api/pai/ai-sdk/chat/{thread_id}/stream")

    assert done
    assert chunks[: len(early)] == early, "the resume replays from the first chunk"
    assert len(chunks) > len(early)
    assert reduce_chunks(chunks)["parts"] == stored[-1]["parts"]
    assert after.status_code == 204


async def test_foreign_or_missing_thread_is_404(server: DaphneServer) -> None:
    async with Browser(server) as alice, Browser(server) as bob:
        thread_id = await alice.create_thread("slow")
        await bob.create_thread("slow")
        answers = []
        for target in (thread_id, "thr_missing"):
            body = {"id": target, "messages": [user_message("hi")], "trigger": "submit-message"}
            post = await chat(bob, body)
            await post.aread()
            get = await bob.http.get(f"/api/pai/ai-sdk/chat/{target}/stream")
            answers.append((post.status_code, post.json(), get.status_code, get.json()))
    assert answers[0] == answers[1]
    assert answers[0][0] == 404 and answers[0][2] == 404


async def test_bad_bodies_and_csrf(server: DaphneServer) -> None:
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        no_csrf = await alice.http.post(
            "/api/pai/ai-sdk/chat", json={"id": thread_id, "messages": [user_message("x")]}
        )
        assert no_csrf.status_code == 403
        for body in (
            {"id": thread_id},
            {"messages": []},
            [1],
            {"id": thread_id, "messages": [{"role": "system", "parts": []}]},
        ):
            response = await chat(alice, body)  # type: ignore[arg-type]
            await response.aread()
            assert response.status_code == 422, body
            assert response.json()["error"]["code"] == "invalid_input"


async def test_use_chat_approves_a_pending_tool_call_with_the_sdks_own_api(
    server: DaphneServer,
) -> None:
    """The pending approval streams as the SDK's ``tool-approval-request``; the assistant
    message useChat sends back after ``addToolApprovalResponse`` answers it, and the resumed
    run streams the tool's output and the final answer."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("toolbox")
        question = user_message("needs approval")
        response = await chat(alice, {"id": thread_id, "messages": [question]})
        chunks, _ = await read_sse(response)
        await response.aclose()
        request = next(c for c in chunks if c["type"] == "tool-approval-request")
        for chunk in chunks:
            validate_chunk(chunk)
        shown = reduce_chunks(per_message(chunks)[0])
        part = next(p for p in shown["parts"] if p["type"] == "tool-transfer")
        assert part["state"] == "approval-requested"
        assert part["approval"]["id"] == request["approvalId"]

        # What useChat holds after addToolApprovalResponse({id, approved: true}).
        part["state"] = "approval-responded"
        part["approval"] = {"id": request["approvalId"], "approved": True}
        response = await chat(alice, {"id": thread_id, "messages": [question, shown]})
        assert response.status_code == 200
        resumed, _ = await read_sse(response)
        await response.aclose()
        for chunk in resumed:
            validate_chunk(chunk)
        assert any(
            c["type"] == "tool-output-available" and c["output"] == {"transferred": 42}
            for c in resumed
        )
        stored = await alice.messages(thread_id)

    transfer = next(p for m in stored for p in m["parts"] if p["type"] == "tool-transfer")
    assert transfer["state"] == "output-available"
    assert transfer["approval"]["approved"] is True
    assert stored[-1]["parts"][-1]["text"] == "All tools have reported back."
