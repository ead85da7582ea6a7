"""The demo agent on a real OpenAI-compatible HTTP server (the local fake), end to end."""

from __future__ import annotations

import asyncio
import json

import pytest

from pai_project.agents import demo
from pai_threads import services
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Step
from tests.support.fake_openai import (
    FakeOpenAIServer,
    finish_chunk,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch):
    server = FakeOpenAIServer(
        responses=[
            [
                *tool_call_chunks("call_1", "calculator", '{"expression": "6*7"}', split_into=4),
                finish_chunk("tool_calls"),
                usage_chunk(50, 12),
            ],
            [*text_chunks("6 * 7 is 42.", pieces=4), finish_chunk("stop"), usage_chunk(80, 7)],
        ]
    )
    with server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("PAI_MODEL", "fake-model")
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        demo._online_model.cache_clear()
        yield server
    demo._online_model.cache_clear()


def test_demo_agent_uses_the_configured_openai_compatible_server(
    openai_env: FakeOpenAIServer,
) -> None:
    identity = Identity(scope_key="user:carol")
    thread = services.create_thread(identity)
    sent = services.send(
        identity, thread.id, {"parts": [{"type": "text", "text": "6 times 7?"}]}, dispatch=False
    )

    async def run_and_close() -> object:
        # The provider's HTTP client belongs to the loop that used it: close it there.
        try:
            return await aexecute_run(sent.run.id)
        finally:
            await demo.choose_model(None).aclose()  # type: ignore[arg-type, union-attr]

    outcome = asyncio.run(run_and_close())

    assert outcome is not None and outcome.status == "completed"  # type: ignore[attr-defined]
    first, second = openai_env.requests
    assert first["model"] == "fake-model" and first["stream"] is True
    # The real model is offered every demo tool, the ones the offline model shows included.
    assert {t["function"]["name"] for t in first["tools"]} == {
        "calculator",
        "clock",
        "send_email",
        "ask_reservation",
        "count_primes",
    }
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][-1] == {"role": "user", "content": "6 times 7?"}
    # The tool result went back to the server as a tool message for the same call id.
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    assert json.loads(tool_message["content"])["result"] == 42

    step1, step2 = Message.objects.filter(run_id=sent.run.id, role="assistant").order_by("id")
    part = next(p for p in step1.parts if p["type"] == "tool-calculator")
    assert part["state"] == "output-available" and part["input"] == {"expression": "6*7"}
    assert step2.parts[-1] == {"type": "text", "text": "6 * 7 is 42.", "state": "done"}
    usages = [s.usage for s in Step.objects.filter(run_id=sent.run.id).order_by("index")]
    assert usages == [
        {"inputTokens": 50, "outputTokens": 12, "totalTokens": 62},
        {"inputTokens": 80, "outputTokens": 7, "totalTokens": 87},
    ]
    assert Run.objects.get(id=sent.run.id).usage["totalTokens"] == 149
