"""The real AI SDK (``readUIMessageStream``, ``Chat`` + ``DefaultChatTransport``) against the
SSE endpoint of a live daphne server (harness smoke tests; the full conformance suite is in
``test_ai_sdk_conformance.py``)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.support.ai_sdk import read_ui_message_stream, run_chat_as
from tests.support.realtime import server_fixture
from tests.support.server import Browser, DaphneServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

server = server_fixture("ai-sdk-real")


async def sse_body(alice: Browser, body: dict[str, Any]) -> str:
    response = await alice.http.post(
        "/api/pai/ai-sdk/chat", json=body, headers={"X-CSRFToken": alice.csrf}
    )
    assert response.status_code == 200, response.text
    return response.text


def user_message(text: str) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:12]}",
        "role": "user",
        "parts": [{"type": "text", "text": text}],
    }


async def test_read_ui_message_stream_accepts_every_sse_chunk(server: DaphneServer) -> None:
    """Each chunk of the SSE body passes the SDK's own chunk schema, and the text run folds
    to the stored assistant message's parts."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        body = await sse_body(alice, {"id": thread_id, "messages": [user_message("hi")]})
        stored = await alice.messages(thread_id)
    result = read_ui_message_stream(body)
    assert result.invalid == [] and result.errors == [] and result.valid
    assert result.message["id"] == stored[-1]["id"]
    assert result.message["parts"] == stored[-1]["parts"]


async def test_chat_with_default_chat_transport_sends_and_streams(server: DaphneServer) -> None:
    """useChat's Chat posts through DefaultChatTransport with the session and CSRF header and
    ends ready with the user message and the streamed answer."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        result = await run_chat_as(alice, thread_id, [{"op": "send", "text": "hello"}])
        stored = await alice.messages(thread_id)
    assert result.errors == []
    assert result.steps[-1]["status"] == "ready"
    assert [m["role"] for m in result.messages] == ["user", "assistant"]
    assert result.messages[-1]["parts"] == stored[-1]["parts"]
