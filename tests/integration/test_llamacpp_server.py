"""Opt-in: the runtime against a real llama.cpp server (../shared/localllm/README.md).

Skipped unless ``PAI_TEST_LLAMACPP_URL`` (e.g. ``http://127.0.0.1:8080/v1``) answers
``GET /models``. The model is a small base model whose words are nonsense, so these tests
check protocol and structure only: finish reasons, usage, tool-call shapes, the bounds on
side calls and tool calls; never the text. ``PAI_TEST_LLAMACPP_MODEL`` names the model
(default ``gemma-3-270m``).
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pai_agents import ModelSelection, ThreadTitles, define_agent
from pai_agents.engine.generation import FINISH_REASONS
from pai_agents.models.openai_chat import OpenAIChatModel
from pai_agents.title_generation import generate_title
from pai_agents.titles import ThreadTitleInput
from tests.support.engine_harness import executed, harness

pytestmark = pytest.mark.llamacpp

URL = os.environ.get("PAI_TEST_LLAMACPP_URL", "")
MODEL = os.environ.get("PAI_TEST_LLAMACPP_MODEL", "gemma-3-270m")


def _reachable(url: str) -> bool:
    if not url:
        return False
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/models", timeout=2) as response:
            json.loads(response.read() or b"{}")
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


@pytest.fixture
async def model() -> AsyncIterator[OpenAIChatModel]:
    if not _reachable(URL):
        pytest.skip("no llama.cpp server at PAI_TEST_LLAMACPP_URL")
    llm = OpenAIChatModel(model=MODEL, base_url=URL, timeout=120)
    try:
        yield llm
    finally:
        await llm.aclose()


def _pai(message: Any) -> dict[str, Any]:
    return dict(message["metadata"]["pai"])


async def test_a_plain_run_reports_a_known_finish_reason_and_usage(model: OpenAIChatModel) -> None:
    selection = ModelSelection(model=model, settings={"maxOutputTokens": 24})
    h = harness(model=selection, tools=(), prompt="Say hello.")
    assert (await h.run()).status == "completed"
    pai = _pai(h.store.client_messages(h.thread_id)[-1])
    assert pai["diagnostics"]["finishReason"] in FINISH_REASONS
    assert pai["diagnostics"]["provider"] == "openai"
    assert pai["usage"]["inputTokens"] > 0 and pai["usage"]["outputTokens"] > 0
    assert "estimated" not in pai["usage"]


async def test_a_step_cut_by_its_token_limit_says_length_and_runs_no_tool(
    model: OpenAIChatModel,
) -> None:
    """Two output tokens cannot finish a turn: the step ends ``length`` on the stream and in
    the stored diagnostics, and any call it began is not executed."""
    selection = ModelSelection(model=model, settings={"maxOutputTokens": 2})
    h = harness(model=selection, prompt="Look up the weather in Lisbon.", max_steps=1)
    assert (await h.run()).status == "completed"
    first = h.store.client_messages(h.thread_id)[1]
    diagnostics = _pai(first)["diagnostics"]
    assert diagnostics["finishReason"] == "length"
    assert diagnostics["rawFinishReason"] == "length"
    finishes = [c for c in h.sink.chunks(first["id"]) if c["type"] == "finish"]
    assert finishes == [{"type": "finish", "finishReason": "length"}]
    assert executed == []


async def test_tool_calls_stay_within_the_per_step_bound(model: OpenAIChatModel) -> None:
    selection = ModelSelection(model=model, settings={"maxOutputTokens": 200})
    h = harness(
        model=selection,
        prompt="Call lookup for a, b, c, d, e and f.",
        max_steps=2,
        max_tool_calls_per_step=2,
    )
    outcome = await h.run(retry_backoff_seconds=0.1)
    assert outcome.status in ("completed", "waiting")
    for message in h.assistant():
        executed_here = [
            p
            for p in message["parts"]
            if p["type"].startswith("tool-") and p.get("state") == "output-available"
        ]
        assert len(executed_here) <= 2
        for part in message["parts"]:
            if part["type"].startswith("tool-"):
                assert part["toolCallId"] and part["state"] in (
                    "output-available",
                    "output-error",
                    "approval-requested",
                )


async def test_a_title_call_is_bounded(model: OpenAIChatModel) -> None:
    """The default title call sends its token limit and stops at the first usable line;
    whatever the model says, it is over well within the deadline."""
    agent = define_agent(
        "titled",
        instructions="Help.",
        model=model,
        thread_titles=ThreadTitles(max_output_tokens=16, timeout_seconds=60),
    )
    assert agent.thread_titles is not None
    title_input = ThreadTitleInput(
        thread_id="thr_1",
        run_id="run_1",
        identity={},
        client_data={},
        runtime_context=None,
        title="",
        title_source="",
        messages=[{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}],
    )
    title = await asyncio.wait_for(generate_title(agent, agent.thread_titles, title_input), 60)
    assert title is None or (isinstance(title, str) and "\n" not in title)
