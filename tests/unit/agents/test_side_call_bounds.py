"""Side calls (thread titles, reasoning summaries) are bounded on a real HTTP model server.

A local server with one slot makes every other request wait while a side call runs, so
each side call asks for a small output limit, stops reading (and closes the stream) at its
first usable line, and has a deadline. The provider and the ``openai`` SDK are real; the
server is the scripted fake.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pai_agents import ReasoningSummary, ScriptedStep, ThreadTitles, define_agent
from pai_agents.behavior import AgentDefinitionError
from pai_agents.models.openai_chat import OpenAIChatModel
from pai_agents.reasoning_summary import ReasoningSummaryInput, generate_reasoning_summary
from pai_agents.title_generation import generate_title
from pai_agents.titles import ThreadTitleInput
from tests.support.engine_harness import harness
from tests.support.fake_openai import FakeOpenAIServer, SSEResponse, text_chunks

CONVERSATION: list[Any] = [
    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Plan a trip to Lisbon"}]},
    {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "Sure: three days."}]},
]


def _title_input() -> ThreadTitleInput:
    return ThreadTitleInput(
        thread_id="thr_1",
        run_id="run_1",
        identity={},
        client_data={},
        runtime_context=None,
        title="",
        title_source="",
        messages=CONVERSATION,
    )


def _summary_input() -> ReasoningSummaryInput:
    return ReasoningSummaryInput(
        thread_id="thr_1",
        run_id="run_1",
        message_id="msg_1",
        reasoning_ordinal=0,
        reasoning="Add 2 and 3, which is 5.",
        operation="send",
        started_at="2026-01-01T12:00:00+00:00",
        identity={},
        client_data={},
        runtime_context=None,
    )


def _rambling(first_line: str) -> SSEResponse:
    """A first line, then more text, then a stream that never ends on its own."""
    return SSEResponse(
        chunks=text_chunks(f"{first_line}\nAnd then the model goes on and on", pieces=6),
        hang=True,
    )


async def test_a_title_call_asks_for_few_tokens_and_stops_at_its_first_line() -> None:
    """The title request carries max_completion_tokens; the answer is read up to its first
    usable line and the stream is closed there (the server sees the client hang up), rather
    than held until the server's own limit."""
    with FakeOpenAIServer(responses=[_rambling("Title: Lisbon trip")]) as server:
        model = OpenAIChatModel(model="fake-model", base_url=server.base_url, timeout=10)
        agent = define_agent("t", instructions="Help.", model=model, thread_titles=True)
        assert agent.thread_titles is not None
        try:
            title = await asyncio.wait_for(
                generate_title(agent, agent.thread_titles, _title_input()), timeout=10
            )
        finally:
            await model.aclose()
        (request,) = server.requests
        exchange = server.exchanges[0]
        assert await asyncio.to_thread(exchange.client_disconnected.wait, 10)
    assert title == "Lisbon trip"
    assert request["max_completion_tokens"] == 32
    assert "temperature" not in request and "tools" not in request


async def test_a_reasoning_summary_is_bounded_the_same_way() -> None:
    with FakeOpenAIServer(responses=[_rambling("Adding two numbers")]) as server:
        model = OpenAIChatModel(model="fake-model", base_url=server.base_url, timeout=10)
        config = ReasoningSummary(max_output_tokens=20)
        agent = define_agent("s", instructions="Help.", model=model, reasoning_summary=config)
        try:
            summary = await asyncio.wait_for(
                generate_reasoning_summary(agent, config, _summary_input(), selected=model),
                timeout=10,
            )
        finally:
            await model.aclose()
        (request,) = server.requests
        assert await asyncio.to_thread(server.exchanges[0].client_disconnected.wait, 10)
    assert summary == "Adding two numbers"
    assert request["max_completion_tokens"] == 20


async def test_a_summary_past_its_deadline_does_not_hold_the_step() -> None:
    """The step's end waits for its summaries, at most the option's timeout_seconds: a
    generator that never answers is dropped, and the run completes without a summary."""
    never = asyncio.Event()

    async def stuck(_: Any) -> str:
        await never.wait()
        return "never"

    h = harness(
        [ScriptedStep.reply("Five.", reasoning="Add 2 and 3.")],
        tools=(),
        reasoning_summary=ReasoningSummary(generator=stuck, timeout_seconds=0.05),
    )
    outcome = await asyncio.wait_for(h.run(), timeout=30)
    assert outcome.status == "completed"
    (answer,) = h.assistant()
    reasoning = [p for p in answer["parts"] if p["type"] == "reasoning"]
    assert reasoning and "summary" not in reasoning[0]


@pytest.mark.parametrize(
    ("option", "kwargs"),
    [
        (ThreadTitles, {"max_output_tokens": 0}),
        (ThreadTitles, {"timeout_seconds": 0}),
        (ReasoningSummary, {"max_output_tokens": True}),
        (ReasoningSummary, {"timeout_seconds": -1}),
    ],
)
def test_side_call_bounds_are_checked_at_definition(option: Any, kwargs: dict[str, Any]) -> None:
    with pytest.raises(AgentDefinitionError):
        option(**kwargs)
