"""Reasoning summaries on the in-memory engine (AD-050..AD-054, MF-013, TH-016).

Each test runs RunEngine with InMemoryThreadStore and a RecordingSink on a model that emits
reasoning parts, then checks when the summary generator ran, what it received, the published
chunks, the stored step message (reserved ``data-pai-reasoning-summary`` parts) and the client
projection (``project_reasoning_summaries``, mirrored by ``static/pai/reducer.js``).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import (
    InMemoryThreadStore,
    ModelRequest,
    ModelSelection,
    ReasoningSummary,
    ReasoningSummaryInput,
    RecordingSink,
    RunEngine,
    ScriptedModel,
    ScriptedStep,
    define_agent,
    tool,
)
from pai_agents.abort import AbortSignal
from pai_agents.lifecycle import Continue, RunPatch
from pai_agents.messages.reasoning_summary import (
    REASONING_SUMMARY_PART,
    project_reasoning_summaries,
)
from pai_agents.reasoning_summary import DEFAULT_REASONING_SUMMARY_INSTRUCTIONS

pytestmark = pytest.mark.filterwarnings("error")

STATIC = Path(__file__).resolve().parents[3] / "pai_threads" / "static" / "pai"


class Pair(BaseModel):
    a: int
    b: int


@tool(input=Pair)
def add(args: Pair) -> int:
    """Add two numbers."""
    return args.a + args.b


class ReasoningModel:
    """Streams a fixed list of parts per step; ``between`` runs before the part at its key
    (an index into the step's parts), so a test can act while the stream is mid-step."""

    def __init__(
        self,
        steps: list[list[dict[str, Any]]],
        between: dict[int, Callable[[], Any]] | None = None,
    ) -> None:
        self.steps = list(steps)
        self.between = between or {}
        self.requests: list[ModelRequest] = []

    @property
    def provider(self) -> str:
        return "reasoning"

    @property
    def model_id(self) -> str:
        return "reasoning-1"

    async def stream(
        self, request: ModelRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        self.requests.append(request)
        for index, part in enumerate(self.steps.pop(0)):
            hook = self.between.get(index)
            if hook is not None:
                await hook()
            yield part


def _reasoning(part_id: str, *pieces: str) -> list[dict[str, Any]]:
    return [
        {"type": "reasoning-start", "id": part_id},
        *({"type": "reasoning-delta", "id": part_id, "delta": piece} for piece in pieces),
        {"type": "reasoning-end", "id": part_id},
    ]


def _text(part_id: str, text: str) -> list[dict[str, Any]]:
    return [
        {"type": "text-start", "id": part_id},
        {"type": "text-delta", "id": part_id, "delta": text},
        {"type": "text-end", "id": part_id},
    ]


FINISH = {"type": "finish", "finishReason": "stop", "usage": {}}


async def _run(
    agent: Any, *, initiator: str = "send"
) -> tuple[InMemoryThreadStore, str, RecordingSink, Any]:
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="s", agent_name=agent.name)
    run_id = store.send(
        thread_id, {"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]}
    )
    claim = await store.claim_run(run_id, owner="w", lease_seconds=30)
    sink = RecordingSink()
    outcome = await RunEngine(agent=agent, store=store, sink=sink).run_episode(claim)
    return store, thread_id, sink, outcome


def _summaries(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"] == REASONING_SUMMARY_PART]


# -- starts when the part closes, never holds back the stream --


async def test_summary_starts_when_the_reasoning_part_closes_without_holding_the_stream() -> None:
    """AD-050: the generator starts as soon as the reasoning part ends, while the model is
    still streaming; the rest of the stream (the whole answer) passes while it runs, and
    the step waits for it only once the stream is over."""
    started = asyncio.Event()
    release = asyncio.Event()
    seen: list[str] = []

    async def generator(summary_input: ReasoningSummaryInput) -> str:
        started.set()
        await release.wait()
        seen.append("summary done")
        return "Adds the numbers"

    async def summary_already_running() -> None:
        await asyncio.wait_for(started.wait(), 1)  # started at reasoning-end
        seen.append("text streams")

    async def stream_over() -> None:
        seen.append("stream over")
        release.set()

    parts = [*_reasoning("r1", "I should ", "add."), *_text("t1", "3"), FINISH]
    model = ReasoningModel([parts], between={4: summary_already_running, 7: stream_over})
    agent = define_agent(
        "rs", instructions="x", model=model, reasoning_summary=ReasoningSummary(generator=generator)
    )
    store, thread_id, sink, outcome = await _run(agent)
    assert outcome.status == "completed"
    assert seen == ["text streams", "stream over", "summary done"]
    step = store.thread_messages(thread_id)[1]
    chunks = sink.chunks(step["id"])
    kinds = [c["type"] for c in chunks]
    # The answer streamed before the summary; the summary precedes the step's end.
    assert kinds.index(REASONING_SUMMARY_PART) > kinds.index("text-end")
    assert kinds.index(REASONING_SUMMARY_PART) < kinds.index("finish-step")


# -- kept with its reasoning part, live and in snapshots --


async def test_summary_is_stored_with_its_part_and_projected_as_summary() -> None:
    """AD-051, MF-013: the summary is published as a reserved data chunk, stored in the step
    message, and the client projection shows it as ``summary`` on its reasoning part (the
    reserved part itself never reaches clients)."""
    model = ScriptedModel(steps=[ScriptedStep(reasoning="Think hard about it.", text="Done")])
    agent = define_agent(
        "rs",
        instructions="x",
        model=model,
        reasoning_summary=ReasoningSummary(generator=lambda i: f"label {i.reasoning_ordinal}"),
    )
    store, thread_id, sink, _ = await _run(agent)
    step = store.thread_messages(thread_id)[1]
    assert _summaries(step) == [
        {
            "type": REASONING_SUMMARY_PART,
            "id": "0",
            "data": {"reasoningOrdinal": 0, "summary": "label 0"},
        }
    ]
    published = [c for c in sink.chunks(step["id"]) if c["type"] == REASONING_SUMMARY_PART]
    assert published == _summaries(step)
    projected = project_reasoning_summaries(step)
    reasoning = [p for p in projected["parts"] if p["type"] == "reasoning"]
    assert reasoning[0]["summary"] == "label 0"
    assert reasoning[0]["text"] == "Think hard about it."
    assert not any(p["type"].startswith("data-pai-") for p in projected["parts"])


async def test_summary_parts_never_reach_the_model() -> None:
    """MF-013: the stored summary part is a reserved data part: the next step's request
    carries the reasoning and the answer, never the label."""
    model = ScriptedModel(
        steps=[
            ScriptedStep(
                reasoning="Plan.", tool_calls=ScriptedStep.call("add", {"a": 1, "b": 2}).tool_calls
            ),
            ScriptedStep(text="3"),
        ]
    )
    agent = define_agent(
        "rs",
        instructions="x",
        model=model,
        tools=[add],
        reasoning_summary=ReasoningSummary(generator=lambda i: "SECRET-LABEL"),
    )
    await _run(agent)
    assert "SECRET-LABEL" not in json.dumps(model.requests[1].messages)
    assert "Plan." in json.dumps(model.requests[1].messages)


_NODE_FOLD = """
import { MessageReducer, projectReasoningSummaries, unprojectReasoningSummaries } from "%s";
let text = "";
for await (const data of process.stdin) text += data;
const chunks = JSON.parse(text);
const reducer = new MessageReducer({ id: "", role: "assistant", parts: [] });
for (const chunk of chunks) reducer.apply(chunk);
const view = projectReasoningSummaries(structuredClone(reducer.message));
const back = unprojectReasoningSummaries(view);
console.log(JSON.stringify({ final: reducer.message, view, back }));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_the_browser_reducer_folds_the_summary_onto_its_part() -> None:
    """AD-051, MF-013 in static/pai/reducer.js: the live chunks fold to the stored message,
    and the browser projection equals the server's (``summary`` on the reasoning part)."""
    parts = [*_reasoning("r1", "one"), *_text("t1", "a"), *_reasoning("r1", "two"), FINISH]
    agent = define_agent(
        "rs",
        instructions="x",
        model=ReasoningModel([parts]),
        reasoning_summary=ReasoningSummary(generator=lambda i: f"S{i.reasoning_ordinal}"),
    )
    store, thread_id, sink, _ = await _run(agent)
    step = store.thread_messages(thread_id)[1]
    script = _NODE_FOLD % (STATIC / "reducer.js").as_uri()
    folded = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        input=json.dumps(sink.chunks(step["id"])),
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    out = json.loads(folded.stdout)
    assert out["final"] == step
    assert out["view"] == project_reasoning_summaries(step)
    assert [p.get("summary") for p in out["view"]["parts"] if p["type"] == "reasoning"] == [
        "S0",
        "S1",
    ]
    assert project_reasoning_summaries(out["back"]) == out["view"]


# -- the generator input --


async def test_generator_input_carries_ordinal_text_ids_and_operation() -> None:
    """AD-052: one call per closed reasoning part with its zero-based ordinal among the
    step message's reasoning parts, its complete text, the message, run and thread ids and
    the operation; the next step's message counts from zero again."""
    inputs: list[ReasoningSummaryInput] = []

    def generator(summary_input: ReasoningSummaryInput) -> str:
        inputs.append(summary_input)
        return "label"

    call = {"type": "tool-call", "toolCallId": "c1", "toolName": "add", "input": '{"a":1,"b":2}'}
    first = [*_reasoning("r", "first ", "part"), *_text("t", "x"), *_reasoning("r", "second"), call]
    second = [*_reasoning("r", "third"), *_text("t", "3"), FINISH]
    agent = define_agent(
        "rs",
        instructions="x",
        model=ReasoningModel([[*first, {**FINISH, "finishReason": "tool-calls"}], second]),
        tools=[add],
        reasoning_summary=ReasoningSummary(generator=generator),
    )
    store, thread_id, _, outcome = await _run(agent)
    assert outcome.status == "completed"
    messages = store.thread_messages(thread_id)
    run_id = store.client_messages(thread_id)[1]["metadata"]["pai"]["runId"]
    assert [(i.reasoning_ordinal, i.reasoning, i.message_id) for i in inputs] == [
        (0, "first part", messages[1]["id"]),
        (1, "second", messages[1]["id"]),
        (0, "third", messages[2]["id"]),
    ]
    assert {i.thread_id for i in inputs} == {thread_id}
    assert {i.run_id for i in inputs} == {run_id}
    assert {i.operation for i in inputs} == {"send"}
    assert all(i.started_at for i in inputs)


async def test_operation_is_the_runs_initiator() -> None:
    """AD-052: a regenerate run's summaries say ``regenerate``."""
    inputs: list[ReasoningSummaryInput] = []
    agent = define_agent(
        "rs",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep(reasoning="r", text="t")]),
        reasoning_summary=ReasoningSummary(generator=lambda i: inputs.append(i) or "s"),
    )
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="s", agent_name="rs")
    run_id = store.send(
        thread_id, {"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]}
    )
    claim = await store.claim_run(run_id, owner="w", lease_seconds=30)
    claim = type(claim)(**{**claim.__dict__, "initiator": "regenerate"})
    await RunEngine(agent=agent, store=store).run_episode(claim)
    assert [i.operation for i in inputs] == ["regenerate"]


# -- custom generator vs default summarizer --


async def test_custom_generator_replaces_the_default_summarizer() -> None:
    """AD-053: with a generator, the summary model and the instruction builder are unused."""
    summary_model = ScriptedModel(steps=[])  # any request would raise ScriptExhausted
    built: list[Any] = []
    agent = define_agent(
        "rs",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep(reasoning="r", text="t")]),
        reasoning_summary=ReasoningSummary(
            model=summary_model,
            instructions=lambda i: built.append(i) or "never",
            generator=lambda i: "custom",
        ),
    )
    store, thread_id, _, _ = await _run(agent)
    assert summary_model.requests == []
    assert built == []
    assert _summaries(store.thread_messages(thread_id)[1])[0]["data"]["summary"] == "custom"


async def test_default_summarizer_calls_the_instruction_builder_per_part() -> None:
    """AD-053: the builder runs once for each closed reasoning part sent to the default
    summarizer, with that part's input, and its value leads the summary request."""
    built: list[ReasoningSummaryInput] = []

    def instructions(summary_input: ReasoningSummaryInput) -> str:
        built.append(summary_input)
        return f"Label part {summary_input.reasoning_ordinal}."

    summary_model = ScriptedModel(
        respond=lambda request: ScriptedStep(text=f'"{request.system}"\nignored')
    )
    parts = [*_reasoning("a", "alpha"), *_reasoning("b", "beta"), *_text("t", "ok"), FINISH]
    agent = define_agent(
        "rs",
        instructions="x",
        model=ReasoningModel([parts]),
        reasoning_summary=ReasoningSummary(model=summary_model, instructions=instructions),
    )
    store, thread_id, _, _ = await _run(agent)
    assert [(i.reasoning_ordinal, i.reasoning) for i in built] == [(0, "alpha"), (1, "beta")]
    assert sorted(r.system for r in summary_model.requests) == ["Label part 0.", "Label part 1."]
    step = store.thread_messages(thread_id)[1]
    assert [p["data"]["summary"] for p in _summaries(step)] == ["Label part 0", "Label part 1"]


# -- which model, without the run's settings --


async def test_default_summarizer_uses_the_selected_model_without_run_settings() -> None:
    """AD-054: without a summary model the selected language model answers, and the
    summary request carries none of the run's model settings or provider options."""

    def respond(request: ModelRequest) -> ScriptedStep:
        if request.system == DEFAULT_REASONING_SUMMARY_INSTRUCTIONS:
            return ScriptedStep(text="Weighs the options.")
        return ScriptedStep(reasoning="Option A or B?", text="A")

    model = ScriptedModel(respond=respond)
    agent = define_agent(
        "rs",
        instructions="x",
        model=ModelSelection(
            model=model,
            settings={"temperature": 0.2, "maxOutputTokens": 50},
            provider_options={"scripted": {"mode": "deep"}},
        ),
        reasoning_summary=True,
    )
    store, thread_id, _, _ = await _run(agent)
    main, summary = model.requests
    assert dict(main.settings) == {"temperature": 0.2, "maxOutputTokens": 50}
    assert main.provider_options
    assert summary.system == DEFAULT_REASONING_SUMMARY_INSTRUCTIONS
    # Only the summary call's own output bound, never the run's settings.
    assert dict(summary.settings) == {"maxOutputTokens": 48}
    assert not summary.provider_options and not summary.tools
    assert summary.messages[-1]["content"][0]["text"] == "Option A or B?"
    step = store.thread_messages(thread_id)[1]
    assert _summaries(step)[0]["data"]["summary"] == "Weighs the options"


async def test_default_summarizer_prefers_the_summary_model() -> None:
    """AD-054: a configured summary model (or resolver) answers instead of the run's."""
    summary_model = ScriptedModel(steps=[ScriptedStep(text="Short label")])
    main = ScriptedModel(steps=[ScriptedStep(reasoning="thinking", text="t")])
    agent = define_agent(
        "rs",
        instructions="x",
        model=main,
        reasoning_summary=ReasoningSummary(model=lambda behavior: summary_model),
    )
    store, thread_id, _, _ = await _run(agent)
    assert len(main.requests) == 1
    assert len(summary_model.requests) == 1
    step = store.thread_messages(thread_id)[1]
    assert _summaries(step)[0]["data"]["summary"] == "Short label"


# -- failures, empty results, hidden reasoning, off --


async def test_a_failing_or_empty_generator_stores_no_summary() -> None:
    """A generator error is logged and an empty result stores nothing; the run completes."""

    def generator(summary_input: ReasoningSummaryInput) -> str | None:
        if summary_input.reasoning_ordinal == 0:
            raise RuntimeError("summarizer down")
        return "   "

    parts = [*_reasoning("a", "alpha"), *_reasoning("b", "beta"), *_text("t", "ok"), FINISH]
    agent = define_agent(
        "rs",
        instructions="x",
        model=ReasoningModel([parts]),
        reasoning_summary=ReasoningSummary(generator=generator),
    )
    store, thread_id, _, outcome = await _run(agent)
    assert outcome.status == "completed"
    assert _summaries(store.thread_messages(thread_id)[1]) == []


async def test_hidden_reasoning_is_never_summarized() -> None:
    """TH-016 with AD-051: reasoning a run keeps from clients (send_reasoning=False) gets no
    summary: the generator is not called and no summary is published or stored."""
    calls: list[Any] = []
    agent = define_agent(
        "rs",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep(reasoning="hidden plan", text="t")]),
        lifecycle={"prepare_run": lambda i: Continue(patch=RunPatch(send_reasoning=False))},
        reasoning_summary=ReasoningSummary(generator=lambda i: calls.append(i) or "leak"),
    )
    store, thread_id, sink, outcome = await _run(agent)
    assert outcome.status == "completed"
    assert calls == []
    assert REASONING_SUMMARY_PART not in json.dumps(sink.events)
    assert "leak" not in json.dumps(store.thread_messages(thread_id))


async def test_hooked_runs_summarize_visible_reasoning() -> None:
    """AD-051 on the lifecycle loop: a hooked run stores its summaries the same way."""
    agent = define_agent(
        "rs",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep(reasoning="visible plan", text="t")]),
        lifecycle={"prepare_run": lambda i: Continue()},
        reasoning_summary=ReasoningSummary(generator=lambda i: "Plans"),
    )
    store, thread_id, sink, _ = await _run(agent)
    step = store.thread_messages(thread_id)[1]
    assert [p["data"]["summary"] for p in _summaries(step)] == ["Plans"]
    assert any(c["type"] == REASONING_SUMMARY_PART for c in sink.chunks(step["id"]))


async def test_no_summaries_unless_configured() -> None:
    """AD-007: without ``reasoning_summary`` nothing is summarized."""
    agent = define_agent(
        "rs",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep(reasoning="plan", text="t")]),
    )
    store, thread_id, sink, _ = await _run(agent)
    assert _summaries(store.thread_messages(thread_id)[1]) == []
    assert REASONING_SUMMARY_PART not in json.dumps(sink.events)
