"""A real model server's failure modes, on the real provider against the fake HTTP server.

Retries after transient faults (503, 429, a connection dropped mid-stream) with the step
reset for clients, the per-step tool-call bound, a step cut by ``length`` (its calls are not
executed, its finish reason is reported), the ``max_steps`` marker, usage of cancelled and
failed steps, and after_step's provider facts (TH-039, LC-143). In-memory store; the HTTP
server and the ``openai`` SDK are real.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from pai_agents import AbortSignal, RunEngine, RunOutcome
from pai_agents.lifecycle import AgentLifecycle, Continue, RunPatch
from pai_agents.models.openai_chat import OpenAIChatModel
from tests.support.engine_harness import Harness, executed, harness, text_of
from tests.support.fake_openai import (
    ErrorResponse,
    FakeOpenAIServer,
    Pause,
    SSEResponse,
    chunk,
    finish_chunk,
    text_chunks,
    text_response,
    tool_call_chunks,
    usage_chunk,
)

FAST = {"retry_backoff_seconds": 0.01}


class Served:
    """A fake server and a provider pointed at it (its client closed on exit)."""

    def __init__(self, responses: Sequence[Any]) -> None:
        self.server = FakeOpenAIServer(responses=responses)

    async def __aenter__(self) -> Served:
        self.server.start()
        self.model = OpenAIChatModel(model="fake-model", base_url=self.server.base_url, timeout=10)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.model.aclose()
        self.server.stop()


def diagnostics(h: Harness, index: int = -1) -> dict[str, Any]:
    message = h.store.client_messages(h.thread_id)[index]
    return dict(message["metadata"]["pai"].get("diagnostics") or {})


def usage(h: Harness, index: int = -1) -> dict[str, Any]:
    message = h.store.client_messages(h.thread_id)[index]
    return dict(message["metadata"]["pai"].get("usage") or {})


def started(h: Harness) -> list[Any]:
    return [e for e in h.sink.events if e["type"] == "generation.started"]


# -- retries --------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [503, 429])
async def test_a_transient_http_error_is_retried_with_backoff(status: int) -> None:
    """ModelError.retryable is read: a 503/429 before streaming fails one attempt, not the
    run; nothing streamed, so no reset is needed."""
    async with Served([ErrorResponse(status), text_response("All good")]) as s:
        h = harness(model=s.model, tools=())
        outcome = await h.run(**FAST)
        assert outcome.status == "completed"
        assert len(s.server.requests) == 2
    assert text_of(h.assistant()[-1]) == "All good"
    assert diagnostics(h)["retries"] == 1
    assert [e.get("restarted") for e in started(h)] == [None]


async def test_a_connection_dropped_mid_stream_retries_and_resets_the_step() -> None:
    """A server restart mid-stream: the step is attempted again, clients are told to reset
    the message (generation.started restarted: true for the same id), the stored answer
    holds the retry's text once, and the dropped attempt's tokens count as estimated."""
    dropped = SSEResponse(chunks=text_chunks("Half an ans"), drop=True)
    async with Served([dropped, text_response("A whole answer")]) as s:
        h = harness(model=s.model, tools=())
        outcome = await h.run(**FAST)
        assert outcome.status == "completed"
    (answer,) = h.assistant()
    assert text_of(answer) == "A whole answer"
    first, second = started(h)
    assert second["messageId"] == first["messageId"] == answer["id"]
    assert second.get("restarted") is True
    # Chunks after the reset rebuild exactly the stored message (no duplicated text).
    after_reset = [
        e["chunk"]
        for e in h.sink.events[h.sink.events.index(second) :]
        if e["type"] == "generation.message.chunk"
    ]
    deltas = "".join(c["delta"] for c in after_reset if c["type"] == "text-delta")
    assert deltas == "A whole answer"
    spent = usage(h)
    assert spent["estimated"] is True and spent["outputTokens"] > 2  # 2: the retry's own


async def test_retries_are_bounded_per_step_and_then_the_run_fails() -> None:
    async with Served([ErrorResponse(503)] * 3) as s:
        h = harness(model=s.model, tools=(), max_retries=1)
        assert (await h.run(**FAST)).status == "failed"
        assert len(s.server.requests) == 2


async def test_th_019_a_run_patch_sets_the_run_retry_count() -> None:
    """TH-019: prepare_run's RunPatch(max_retries=0) wins over the agent's max_retries."""
    lifecycle = {"prepare_run": lambda i: Continue(patch=RunPatch(max_retries=0))}
    async with Served([ErrorResponse(503), text_response("never")]) as s:
        h = harness(model=s.model, tools=(), max_retries=3, parts=[lifecycle])
        assert (await h.run(**FAST)).status == "failed"
        assert len(s.server.requests) == 1


async def test_a_client_error_is_not_retried() -> None:
    async with Served([ErrorResponse(400, type="invalid_request_error"), text_response("x")]) as s:
        h = harness(model=s.model, tools=())
        assert (await h.run(**FAST)).status == "failed"
        assert len(s.server.requests) == 1


# -- tool calls per step, length ------------------------------------------------------------


def _calls(count: int, reason: str) -> list[Any]:
    chunks: list[Any] = []
    for i in range(count):
        chunks += tool_call_chunks(f"call_{i}", "lookup", f'{{"q": "{i}"}}', index=i)
    return [*chunks, finish_chunk(reason), usage_chunk(20, 30)]


async def test_tool_calls_beyond_the_per_step_bound_are_not_executed() -> None:
    """Only the first max_tool_calls_per_step calls run; the others get a model-visible
    error result (so the provider accepts the transcript) and the step's diagnostics count
    them."""
    async with Served([_calls(5, "tool_calls"), text_response("Done")]) as s:
        h = harness(model=s.model, max_tool_calls_per_step=2)
        assert (await h.run(**FAST)).status == "completed"
        second = s.server.requests[1]
    assert sorted(executed) == [("lookup", "0"), ("lookup", "1")]  # calls run concurrently
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [f"call_{i}" for i in range(5)]
    assert "at most 2 tool calls" in tool_messages[4]["content"]
    parts = [p for p in h.assistant()[0]["parts"] if p["type"] == "tool-lookup"]
    assert [p["state"] for p in parts] == ["output-available"] * 2 + ["output-error"] * 3
    assert diagnostics(h, 1)["toolCallsRefused"] == 3


async def test_the_engine_default_bounds_tool_calls_too() -> None:
    async with Served([_calls(4, "tool_calls"), text_response("Done")]) as s:
        h = harness(model=s.model)
        assert (await h.run(max_tool_calls_per_step=3, **FAST)).status == "completed"
    assert len(executed) == 3


async def test_calls_of_a_step_cut_by_length_are_not_executed_and_length_is_reported() -> None:
    """finish_reason=length: the calls may be cut short; none runs, each gets an error the
    model sees, the stream's finish says ``length`` (not ``tool-calls``) and so do the
    stored diagnostics."""
    async with Served([_calls(2, "length"), text_response("Sorry")]) as s:
        h = harness(model=s.model)
        assert (await h.run(**FAST)).status == "completed"
        second = s.server.requests[1]
    assert executed == []
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 2 and all("'length'" in m["content"] for m in tool_messages)
    first_id = h.assistant()[0]["id"]
    finishes = [c for c in h.sink.chunks(first_id) if c["type"] == "finish"]
    assert finishes == [{"type": "finish", "finishReason": "length"}]
    marks = diagnostics(h, 1)
    assert marks["finishReason"] == "length" and marks["rawFinishReason"] == "length"
    assert marks["toolCallsRefused"] == 2


async def test_a_text_step_cut_by_length_is_marked() -> None:
    cut = [*text_chunks("An answer that goes on and"), finish_chunk("length"), usage_chunk(5, 6)]
    async with Served([cut]) as s:
        h = harness(model=s.model, tools=())
        assert (await h.run()).status == "completed"
    assert diagnostics(h)["finishReason"] == "length"
    assert [c for c in h.sink.chunks() if c["type"] == "finish"][-1]["finishReason"] == "length"


async def test_a_run_stopped_by_max_steps_is_marked() -> None:
    """The model called tools in the last step the budget allows: the run completes, its
    last message says so (maxStepsReached)."""
    async with Served([_calls(1, "tool_calls")]) as s:
        h = harness(model=s.model, max_steps=1)
        assert (await h.run()).status == "completed"
    assert diagnostics(h)["maxStepsReached"] is True


async def test_a_run_within_its_budget_has_no_max_steps_marker() -> None:
    async with Served([_calls(1, "tool_calls"), text_response("Done")]) as s:
        h = harness(model=s.model, max_steps=3)
        assert (await h.run()).status == "completed"
    assert all("maxStepsReached" not in diagnostics(h, i) for i in (1, 2))


# -- usage of cancelled and failed steps -----------------------------------------------------


async def _run_with(h: Harness, signal: AbortSignal, **engine: Any) -> RunOutcome:
    claim = await h.store.claim_run(h.run_id, owner="w", lease_seconds=30)
    return await RunEngine(agent=h.agent, store=h.store, sink=h.sink, **engine).run_episode(
        claim, signal=signal
    )


async def test_a_cancelled_step_stores_estimated_usage() -> None:
    hanging = SSEResponse(chunks=[*text_chunks("Working on a long answer")], hang=True)
    async with Served([hanging]) as s:
        h = harness(model=s.model, tools=())
        signal = AbortSignal()
        task = asyncio.create_task(_run_with(h, signal))
        while not any(c["type"] == "text-delta" for c in h.sink.chunks()):
            await asyncio.sleep(0.01)
        signal.abort("cancelled")
        assert (await task).status == "cancelled"
    spent = usage(h)
    assert spent["estimated"] is True and spent["outputTokens"] > 0
    assert h.row.usage["estimated"] is True


async def test_a_failed_step_counts_its_spent_tokens_on_the_run() -> None:
    """A step that fails before its first checkpoint: the run fails and its usage holds the
    estimate (it was {})."""
    dropped = SSEResponse(chunks=text_chunks("Some words before"), drop=True)
    async with Served([dropped]) as s:
        h = harness(model=s.model, tools=(), max_retries=0)
        assert (await h.run()).status == "failed"
    assert h.row.usage["estimated"] is True and h.row.usage["outputTokens"] > 0


async def test_reported_usage_is_not_marked_estimated() -> None:
    async with Served([text_response("Fine", prompt_tokens=7, completion_tokens=1)]) as s:
        h = harness(model=s.model, tools=())
        await h.run()
    assert usage(h) == {"inputTokens": 7, "outputTokens": 1, "totalTokens": 8}


# -- after_step's provider facts ------------------------------------------------------------


class StepFacts(AgentLifecycle):
    def __init__(self) -> None:
        self.steps: list[Any] = []

    def after_step(self, input: Any) -> None:
        self.steps.append(input.step)


async def test_th_039_lc_143_after_step_gets_provider_metadata_and_raw_facts() -> None:
    """TH-039, LC-143: provider_metadata is the provider's own metadata (keyed by provider),
    not the response's id/model; the raw finish reason, request and response metadata are
    there beside it."""
    fingerprinted = chunk({"role": "assistant", "content": "Hi"})
    fingerprinted["system_fingerprint"] = "fp_123"
    facts = StepFacts()
    async with Served([[fingerprinted, finish_chunk("stop"), usage_chunk(3, 1)]]) as s:
        h = harness(model=s.model, tools=(), parts=[facts])
        await h.run()
    (step,) = facts.steps
    assert step.provider_metadata == {"openai": {"systemFingerprint": "fp_123"}}
    assert step.response_metadata == {"id": "chatcmpl-fake", "modelId": "fake-model"}
    assert step.finish_reason == "stop" and step.raw_finish_reason == "stop"
    assert step.request_metadata["provider"] == "openai"
    assert step.request_metadata["modelId"] == "fake-model"
    assert step.warnings == ()
    assert step.usage == {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4}


async def test_a_pause_mid_stream_is_not_a_fault() -> None:
    slow = [*text_chunks("Slow"), Pause(0.05), *text_chunks(" but fine"), finish_chunk("stop")]
    async with Served([slow]) as s:
        h = harness(model=s.model, tools=())
        assert (await h.run()).status == "completed"
        assert len(s.server.requests) == 1
    assert "retries" not in diagnostics(h)
