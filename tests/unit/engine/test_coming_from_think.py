"""The examples of docs/coming-from-think.md, executed from the page and run in an agent.

Each ``<!-- example: name -->`` block is exec'd as written; the tests then drive RunEngine
with what it defines and check the peer behaviour it claims (TH rules).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import RunEngine, ScriptedModel, ScriptedStep, ToolContext, tool
from pai_agents.lifecycle import (
    AgentLifecycle,
    Continue,
    LifecyclePatchError,
    ModelStepPatch,
    StructuredOutputError,
)
from pai_agents.lifecycle.patches import coerce_patch
from pai_agents.messages.tool_data import project_tool_data
from pai_agents.models.base import ModelError
from pai_agents.models.openai_chat import OpenAIChatModel
from tests.support.engine_harness import executed, harness, text_of, user
from tests.support.fake_openai import FakeOpenAIServer, text_response

DOC = Path(__file__).resolve().parents[3] / "docs" / "coming-from-think.md"
_BLOCK = re.compile(r"<!-- example: (\w+) -->\s*```python\n(.*?)```", re.DOTALL)


def examples() -> dict[str, str]:
    return dict(_BLOCK.findall(DOC.read_text()))


def run_example(name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"docs_example_{name}"}
    # dont_inherit: the page's code runs without this module's ``from __future__`` imports.
    exec(compile(examples()[name], f"{DOC}:{name}", "exec", dont_inherit=True), namespace)
    return namespace


class SearchArgs(BaseModel):
    query: str = ""
    limit: int | None = None


class PathArgs(BaseModel):
    path: str


class CityArgs(BaseModel):
    city: str


class Forecast(BaseModel):
    forecast: str


@tool(input=SearchArgs)
def search(args: SearchArgs) -> str:
    """Search the docs."""
    executed.append(("search", f"{args.query}:{args.limit}"))
    return f"results for {args.query}"


@tool(input=PathArgs)
def delete(args: PathArgs) -> str:
    """Delete a file."""
    executed.append(("delete", args.path))
    return "deleted"


@tool(input=CityArgs, output=Forecast)
def weather(args: CityArgs) -> Forecast:
    """Weather by city."""
    executed.append(("weather", args.city))
    return Forecast(forecast="rain")


@tool(input=SearchArgs)
def final_answer(args: SearchArgs) -> str:
    """Give the final answer."""
    return "ok"


@tool(input=SearchArgs, needs_approval=True)
def publish(args: SearchArgs) -> str:
    """Publish (approval)."""
    return "published"


@tool(input=SearchArgs)
def mode_probe(args: SearchArgs, ctx: ToolContext) -> str:
    """Report the tool context's mode."""
    executed.append(("mode_probe", ctx.runtime_context["mode"]))
    return "ok"


TOOLS = [search, delete, weather, final_answer, publish]


def test_every_example_of_the_page_is_tested() -> None:
    tested = {
        "before_turn",
        "continuation",
        "before_step",
        "before_tool_call",
        "after_tool_call",
        "on_step_finish",
        "on_chunk",
        "on_chat_response",
        "on_chat_error",
        "stop_when",
        "retries_and_timeout",
        "hook_order",
        "provider_options",
        "extra_tools",
        "prune_tool_calls",
        "send_reasoning",
        "structured_output",
        "context_blocks",
        "prompt_cache",
        "step_model_and_instructions",
        "tool_context",
        "tool_call_context",
        "follow_up",
        "headers",
        "extensions",
        "preliminary_results",
    }
    assert set(examples()) == tested


async def test_th_009_th_012_th_014_th_017_before_turn_maps_to_prepare_run() -> None:
    """TH-007, TH-009, TH-012, TH-013, TH-014, TH-017, TH-023: beforeTurn's TurnConfig."""
    ns = run_example("before_turn")
    h = harness(
        [ScriptedStep.call("search", {"query": "a"}), ScriptedStep.reply("done")],
        parts=[ns["TurnPolicy"]()],
        tools=TOOLS,
        runtime_context=lambda b: dict(b.client_data),
    )
    h.store.runs[h.run_id].client_data = {"selected_file": "guide.md"}
    assert (await h.run()).status == "completed"
    first = h.model.requests[0]
    assert [t["name"] for t in first.tools] == ["search"]
    assert first.system == "You answer questions about our docs.\nUser is editing: guide.md"
    assert first.settings == {"temperature": 0, "maxOutputTokens": 512}
    assert first.tool_choice == "auto"


async def test_th_022_continuation_turns_can_use_a_cheaper_model() -> None:
    """TH-022, TH-008: run.execution.operation == "resume" marks continuation episodes."""
    ns = run_example("continuation")
    cheap = ScriptedModel(steps=[ScriptedStep.reply("cheap answer")], model_name="cheap")
    h = harness(
        [ScriptedStep.call("publish", {"query": "x"}, id="p1")],
        parts=[ns["CheapContinuations"](cheap)],
        tools=TOOLS,
    )
    assert (await h.run()).status == "waiting"
    h.store.respond(h.run_id, "p1", approved=True)
    assert (await h.run()).status == "completed"
    assert len(h.model.requests) == 1 and len(cheap.requests) == 1
    assert text_of(h.assistant()[-1]) == "cheap answer"


async def test_th_025_th_027_before_step_maps_to_prepare_model_step() -> None:
    """TH-024, TH-025, TH-027, TH-029: force a tool on step 0, trim messages from step 2."""
    ns = run_example("before_step")
    h = harness(
        [
            ScriptedStep.call("search", {"query": "a"}),
            ScriptedStep.call("delete", {"path": "x"}),
            ScriptedStep.reply("done"),
        ],
        parts=[ns["SearchFirst"]()],
        tools=TOOLS,
    )
    await h.run()
    first, second, third = h.model.requests
    assert [t["name"] for t in first.tools] == ["search"]
    assert first.tool_choice == {"type": "tool", "toolName": "search"}
    assert len(second.tools) == len(TOOLS) and second.tool_choice is None
    assert len(third.messages) <= 8


async def test_th_031_to_th_034_before_tool_call_allow_block_substitute() -> None:
    """TH-031..TH-034: allow, allow with input, block with a reason, substitute."""
    ns = run_example("before_tool_call")
    h = harness(
        [
            ScriptedStep(
                tool_calls=[
                    *ScriptedStep.call("search", {"query": "q", "limit": 500}).tool_calls,
                    *ScriptedStep.call("delete", {"path": "/etc"}, id="d").tool_calls,
                    *ScriptedStep.call("weather", {"city": "Paris"}, id="w1").tool_calls,
                    *ScriptedStep.call("weather", {"city": "Oslo"}, id="w2").tool_calls,
                ]
            ),
            ScriptedStep.reply("done"),
        ],
        parts=[ns["ToolPolicy"]()],
        tools=TOOLS,
    )
    await h.run()
    assert sorted(executed) == [("search", "q:50"), ("weather", "Oslo")]  # run concurrently
    parts = {p["toolCallId"]: p for p in h.assistant()[0]["parts"] if p.get("toolCallId")}
    assert parts["d"]["errorText"] == "delete is disabled in read-only mode"
    assert parts["w1"]["output"] == {"forecast": "sunny"}
    assert parts["w2"]["output"] == {"forecast": "rain"}


async def test_th_038_after_tool_call_sees_duration_and_success() -> None:
    """TH-038: every outcome with success, output or error, and the duration."""
    ns = run_example("after_tool_call")
    policy = run_example("before_tool_call")
    h = harness(
        [
            ScriptedStep(
                tool_calls=[
                    *ScriptedStep.call("search", {"query": "q"}).tool_calls,
                    *ScriptedStep.call("delete", {"path": "/"}, id="d").tool_calls,
                ]
            ),
            ScriptedStep.reply("done"),
        ],
        parts=[policy["ToolPolicy"](), ns["ToolAnalytics"]()],
        tools=TOOLS,
    )
    await h.run()
    by_tool = {a["tool"]: a for a in ns["ANALYTICS"]}
    assert by_tool["search"]["success"] is True
    assert by_tool["search"]["duration_ms"] >= 0 and by_tool["search"]["source"] == "execute"
    assert by_tool["delete"]["success"] is False
    assert by_tool["delete"]["detail"] == "delete is disabled in read-only mode"
    assert by_tool["delete"]["duration_ms"] is None


async def test_th_039_on_step_finish_maps_to_after_step() -> None:
    """TH-039, TH-003: after_step sees each step's index, finish reason and usage."""
    ns = run_example("on_step_finish")
    h = harness(
        [ScriptedStep.call("search", {"query": "a"}), ScriptedStep.reply("done")],
        parts=[ns["StepLog"]()],
        tools=TOOLS,
    )
    await h.run()
    log = ns["STEP_LOG"]
    assert [line.split(":")[0] for line in log] == ["Step 0 (tool-calls)", "Step 1 (stop)"]


async def test_th_040_on_chunk_maps_to_a_pass_through_transform() -> None:
    """TH-040: every part is observed; the output is unchanged."""
    ns = run_example("on_chunk")
    counter = ns["ChunkCounter"]()
    h = harness(
        [
            ScriptedStep(text="hello there", tool_calls=ScriptedStep.call("search").tool_calls),
            ScriptedStep.reply("done"),
        ],
        parts=[counter],
        tools=TOOLS,
    )
    await h.run()
    assert counter.text_chars == len("hello there") + len("done")
    assert counter.tool_calls == ["search"]
    assert [text_of(m) for m in h.assistant()] == ["hello there", "done"]


async def test_th_041_th_043_on_chat_response_maps_to_run_finished() -> None:
    """TH-041, TH-043: completed and error statuses, message and continuation flag."""
    ns = run_example("on_chat_response")
    finished = ns["Finished"]()
    h = harness([ScriptedStep.reply("hi")], parts=[finished], tools=TOOLS)
    await h.run()
    assert finished.seen == [("completed", False, 2, None)]  # step-start + text

    finished = ns["Finished"]()
    h = harness(
        [ScriptedStep(text="x", fail_with=ModelError("down"))], parts=[finished], tools=TOOLS
    )
    await h.run()
    assert finished.seen == [("error", False, 0, "The run failed.")]


async def test_th_044_on_chat_error_maps_to_on_runtime_error() -> None:
    """TH-044, LC-158: the reporter sees the error; clients only see the failed status."""
    ns = run_example("on_chat_error")

    def broken(input: Any) -> None:
        raise KeyError("secret")

    h = harness(
        [ScriptedStep.reply("hi")],
        parts=[{"prepare_model_step": broken, "name": "quota"}],
        tools=TOOLS,
        on_runtime_error=ns["report"],
    )
    assert (await h.run()).status == "failed"
    assert ns["ERRORS"] == [f"run {h.run_id} failed in quota in prepare_model_step: KeyError"]
    assert "secret" not in str(h.sink.events)


async def test_th_015_stop_when_combines_with_max_steps() -> None:
    """TH-015: the loop ends at has_tool_call("final_answer") before max_steps."""
    ns = run_example("stop_when")
    h = harness(
        [
            ScriptedStep.call("search", {"query": "a"}),
            ScriptedStep.call("final_answer", {"query": "b"}),
            ScriptedStep.call("search", {"query": "c"}),
        ],
        tools=TOOLS,
        max_steps=10,
        stop_when=ns["STOP_WHEN"],
    )
    assert (await h.run()).status == "completed"
    assert len(h.model.requests) == 2


@pytest.mark.parametrize(("failures", "status"), [(2, "completed"), (3, "failed")])
async def test_th_019_retries_and_timeout_map_to_around_model_call(
    failures: int, status: str
) -> None:
    """TH-019, LC-095: setup failures are retried up to max_retries."""
    ns = run_example("retries_and_timeout")

    class Flaky:
        provider, model_id = "flaky", "flaky-1"

        def __init__(self) -> None:
            self.calls = 0

        async def stream(self, request: Any, *, signal: Any = None) -> Any:
            self.calls += 1
            if self.calls <= failures:
                raise ModelError("503")
            yield {"type": "text-start", "id": "t"}
            yield {"type": "text-delta", "id": "t", "delta": "finally"}
            yield {"type": "text-end", "id": "t"}
            yield {"type": "finish", "finishReason": "stop", "usage": {}}

    flaky = Flaky()
    h = harness(
        parts=[ns["RetryWithTimeout"](max_retries=2, timeout_s=5)], model=flaky, tools=TOOLS
    )
    assert (await h.run()).status == status
    assert flaky.calls == min(failures + 1, 3)


# -- hook order and entry paths -----------------------------------------------------------


class EveryPhase(AgentLifecycle):
    """Implements every run phase without changing anything (so each one is traced)."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str]] = []

    def prepare_run(self, input: Any) -> None:
        self.runs.append((input.run.initiator, input.run.execution.operation))

    async def resolve_model_context(self, input: Any, next: Any) -> Any:
        return await next()

    def prepare_model_step(self, input: Any) -> None:
        return None

    async def around_model_call(self, input: Any, next: Any) -> Any:
        return await next()

    def transform_step_stream(self, input: Any) -> Any:
        return input.stream

    def before_tool_call(self, input: Any) -> None:
        return None

    def after_tool_result(self, input: Any) -> None:
        return None

    def after_step(self, input: Any) -> None:
        return None

    def run_finished(self, input: Any) -> None:
        return None


async def test_th_002_th_003_hook_order_is_fixed_and_traceable() -> None:
    """TH-002, TH-003: run hook, then per step context/step/call/stream/tool/step-finished
    hooks, the next step hook after the previous after_step, run_finished last."""
    ns = run_example("hook_order")
    h = harness(
        [ScriptedStep.call("search", {"query": "a"}), ScriptedStep.reply("done")],
        parts=[EveryPhase()],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    assert [phase for _, phase in h.trace.calls] == ns["ORDER"]


@pytest.mark.parametrize("initiator", ["send", "trigger", "regenerate"])
async def test_th_001_hooks_fire_on_every_entry_path(initiator: str) -> None:
    """TH-001: the same hooks, in the same order, for send, trigger and regenerate runs and
    for the episode that resumes after an approval."""
    ns = run_example("hook_order")
    part = EveryPhase()
    h = harness(
        [ScriptedStep.call("publish", {"query": "x"}, id="p1"), ScriptedStep.reply("done")],
        parts=[part],
        tools=TOOLS,
    )
    h.row.initiator = initiator
    assert (await h.run()).status == "waiting"
    first = [phase for _, phase in h.trace.calls]
    assert first[:4] == ns["ORDER"][:4] and first[-1] == "after_step"
    h.trace.clear()
    h.store.respond(h.run_id, "p1", approved=True)
    assert (await h.run()).status == "completed"
    resumed = [phase for _, phase in h.trace.calls]
    assert resumed[0] == "prepare_run" and resumed[-1] == "run_finished"
    assert "before_tool_call" in resumed and "after_tool_result" in resumed
    assert part.runs == [(initiator, initiator), (initiator, "resume")]


# -- beforeTurn ---------------------------------------------------------------------------


async def test_th_018_run_level_provider_options() -> None:
    """TH-018: prepare_run provider_options reach the provider request of every step."""
    ns = run_example("provider_options")
    h = harness(
        [ScriptedStep.call("search", {"query": "a"}), ScriptedStep.reply("done")],
        parts=[ns["OpenAIOptions"]()],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    expected = {"openai": {"parallelToolCalls": False, "user": f"thread-{h.thread_id}"}}
    assert [r.provider_options for r in h.model.requests] == [expected, expected]
    wire = OpenAIChatModel(model="m", api_key="sk-unused").build_request_params(h.model.requests[0])
    assert wire["parallel_tool_calls"] is False
    assert wire["user"] == f"thread-{h.thread_id}"


@pytest.mark.parametrize("beta", [True, False])
async def test_th_011_extra_tools_for_one_run(beta: bool) -> None:
    """TH-011: a gated registration adds a tool to the default set only in runs where its
    gate holds; elsewhere it is neither advertised nor executable."""
    ns = run_example("extra_tools")
    h = harness(
        [ScriptedStep.call("deep_report", {"topic": "x"}), ScriptedStep.reply("done")],
        tools=[*TOOLS, ns["BETA_REPORT"]],
        runtime_context=lambda b: dict(b.client_data),
    )
    h.row.client_data = {"beta": beta}
    assert (await h.run()).status == "completed"
    advertised = [t["name"] for t in h.model.requests[0].tools]
    assert advertised[: len(TOOLS)] == [t.name for t in TOOLS]
    assert ("deep_report" in advertised) is beta
    [part] = [p for p in h.assistant()[0]["parts"] if p.get("toolCallId")]
    assert part["state"] == ("output-available" if beta else "output-error")


async def test_th_010_resolve_model_context_prunes_named_tool_calls() -> None:
    """TH-010: old calls and results of the named tools leave the model messages; client
    tool results and the last two messages stay."""
    ns = run_example("prune_tool_calls")
    history = [
        user("find it", "u0"),
        {
            "id": "a0",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {
                    "type": "tool-search",
                    "toolCallId": "s1",
                    "state": "output-available",
                    "input": {"query": "x"},
                    "output": "found",
                },
                {
                    "type": "tool-pick_color",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {},
                    "output": "blue",
                },
            ],
        },
        {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "blue it is"}]},
    ]
    h = harness(
        [ScriptedStep.reply("ok")], parts=[ns["PruneToolCalls"]()], tools=TOOLS, history=history
    )
    assert (await h.run()).status == "completed"
    messages = h.model.requests[0].messages
    ids = [c.get("toolCallId") for m in messages[1:3] for c in m["content"]]
    assert ids == ["c1", "c1"]  # the client tool's call and result
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "user"]


async def test_th_016_send_reasoning_false_hides_reasoning_but_not_from_the_model() -> None:
    """TH-016: a resumed (continuation) episode publishes and stores no reasoning, while
    its later model steps still get the reasoning of its earlier steps."""
    ns = run_example("send_reasoning")
    h = harness(
        [
            ScriptedStep(
                reasoning="plan in the open",
                tool_calls=ScriptedStep.call("publish", {"query": "x"}, id="p1").tool_calls,
            ),
            ScriptedStep(
                reasoning="hidden thoughts",
                tool_calls=ScriptedStep.call("search", {"query": "y"}).tool_calls,
            ),
            ScriptedStep(reasoning="more hidden", text="done"),
        ],
        parts=[ns["QuietContinuations"]()],
        tools=TOOLS,
    )
    assert (await h.run()).status == "waiting"
    visible = "".join(c.get("delta", "") for c in h.sink.chunks() if c["type"] == "reasoning-delta")
    assert visible == "plan in the open"
    h.store.respond(h.run_id, "p1", approved=True)
    assert (await h.run()).status == "completed"
    published = json.dumps(h.sink.events)
    assert "hidden" not in published
    assert [c["type"] for c in h.sink.chunks() if c["type"].startswith("reasoning")] == [
        "reasoning-start",
        *["reasoning-delta"] * 4,
        "reasoning-end",
    ]
    stored = json.dumps(h.messages())
    assert "hidden" not in stored and "plan in the open" in stored
    last = h.model.requests[-1]
    reasoning = [
        c["text"]
        for m in last.messages
        if m["role"] == "assistant"
        for c in m["content"]
        if c.get("type") == "reasoning"
    ]
    assert reasoning == ["plan in the open", "hidden thoughts"]  # the model loop is unchanged
    assert text_of(h.assistant()[-1]) == "done"


class Verdict(BaseModel):
    severity: str


async def test_th_021_structured_output_disables_tools_and_validates() -> None:
    """TH-021: output= is run-level; tools are off (a step patch cannot add one back), the
    provider gets the JSON schema, and the validated answer completes the run."""
    ns = run_example("structured_output")
    answer = ns["StructuredAnswer"]()
    readd = {"prepare_model_step": lambda i: Continue(patch=ModelStepPatch(tools=["search"]))}
    h = harness(
        [
            ScriptedStep.call("search", {"query": "a"}, id="s1"),
            ScriptedStep.reply('{"severity": "high"}'),
        ],
        parts=[answer, readd],
        tools=TOOLS,
        runtime_context=lambda b: dict(b.client_data),
    )
    h.row.client_data = {"mode": "structured-answer"}
    assert (await h.run()).status == "completed"
    assert executed == []  # the model's tool call was not executable
    first = h.model.requests[0]
    assert first.tools == [] and first.tool_choice is None
    schema = ns["Result"].model_json_schema()
    assert first.response_format == {"type": "json", "schema": schema, "name": "Result"}
    assert [r.severity for r in answer.results] == ["high"]
    wire = OpenAIChatModel(model="m", api_key="sk-unused").build_request_params(first)
    assert wire["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Result", "schema": schema},
    }
    assert "tools" not in wire
    with pytest.raises(LifecyclePatchError):
        coerce_patch({"output": Verdict}, ModelStepPatch)  # not a per-step setting


async def test_th_021_an_invalid_structured_answer_fails_the_run() -> None:
    """TH-021, TH-044: a final text that does not validate fails the run with a typed,
    private error; the model's text is stored; clients only see failed."""
    ns = run_example("structured_output")
    reports: list[Any] = []
    h = harness(
        [ScriptedStep.reply('{"severity": "medium"}')],
        parts=[ns["StructuredAnswer"]()],
        tools=TOOLS,
        runtime_context=lambda b: dict(b.client_data),
        on_runtime_error=reports.append,
    )
    h.row.client_data = {"mode": "structured-answer"}
    assert (await h.run()).status == "failed"
    assert isinstance(reports[0].error, StructuredOutputError)
    assert h.row.error is not None and h.row.error["type"] == "StructuredOutputError"
    assert text_of(h.assistant()[0]) == '{"severity": "medium"}'
    assert "StructuredOutputError" not in json.dumps(h.sink.events)

    plain = harness([ScriptedStep.reply("free text")], parts=[ns["StructuredAnswer"]()])
    assert (await plain.run()).status == "completed"  # no output= when not asked for
    assert plain.model.requests[0].response_format is None


# -- configureSession ---------------------------------------------------------------------


async def test_th_004_context_blocks_build_the_system_prompt() -> None:
    """TH-004: named blocks (static text, a provider with a description and a token
    budget) assemble the system prompt in place of plain instructions."""
    ns = run_example("context_blocks")
    h = harness(
        [ScriptedStep.reply("hi")],
        instructions=ns["INSTRUCTIONS"],
        runtime_context=lambda b: {"memory": "likes tea. " * 1000},
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    system = h.model.requests[0].system
    soul, memory = system.split("\n\n", 1)
    assert soul == "## soul\nYou are a helpful coding assistant."
    title, text = memory.split("\n", 1)
    assert title == "## memory (Learned facts about the user.)"
    assert text.startswith("likes tea.") and len(text) == 1100 * 4


async def test_th_006_cached_system_prompt_keeps_message_local_provider_options() -> None:
    """TH-006: system messages with provider options reach the model request untouched, and
    OpenAIChatModel sends the options of its provider on the wire system message."""
    ns = run_example("prompt_cache")
    h = harness([ScriptedStep.reply("hi")], parts=[ns["CachedPrompt"]()], tools=TOOLS)
    assert (await h.run()).status == "completed"
    request = h.model.requests[0]
    cache = {"gateway": {"cache_control": {"type": "ephemeral"}}}
    assert request.system is None
    assert request.messages[0] == {
        "role": "system",
        "content": ns["SOUL"],
        "providerOptions": cache,
    }
    gateway = OpenAIChatModel(model="m", base_url="http://127.0.0.1:9/v1", provider="gateway")
    wire = gateway.build_request_params(request)
    assert wire["messages"][0] == {
        "role": "system",
        "content": ns["SOUL"],
        "cache_control": {"type": "ephemeral"},
    }
    assert wire["prompt_cache_key"] == "coding-assistant"
    other = OpenAIChatModel(model="m", base_url="http://127.0.0.1:9/v1")  # provider "openai"
    assert other.build_request_params(request)["messages"][0] == {
        "role": "system",
        "content": ns["SOUL"],
    }


# -- beforeStep ---------------------------------------------------------------------------


async def test_th_026_th_028_a_later_step_switches_model_and_instructions() -> None:
    """TH-026, TH-028: once this turn's tools answered, the step goes to another model
    with other instructions; the first step keeps the defaults."""
    ns = run_example("step_model_and_instructions")
    fast = ScriptedModel(steps=[ScriptedStep.reply("summary")], model_name="fast")
    h = harness(
        [ScriptedStep.call("search", {"query": "a"})],
        parts=[ns["SummarizeCheaply"](fast)],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    [first] = h.model.requests
    assert first.system == "be brief" and first.messages[0]["role"] == "user"
    [second] = fast.requests
    assert second.system is None
    assert second.messages[0] == {"role": "system", "content": "Summarize the tool results."}
    assert text_of(h.assistant()[-1]) == "summary"


async def test_th_030_a_step_hook_changes_the_tool_context_from_that_step_on() -> None:
    """TH-030: tools see the runtime context a step hook updated, from that step on."""
    ns = run_example("tool_context")
    h = harness(
        [
            ScriptedStep.call("mode_probe", {"query": "a"}),
            ScriptedStep.call("mode_probe", {"query": "b"}),
            ScriptedStep.reply("done"),
        ],
        parts=[ns["StrictAfterFirstStep"]()],
        tools=[*TOOLS, mode_probe],
        runtime_context=lambda b: {"mode": "lenient"},
    )
    assert (await h.run()).status == "completed"
    assert executed == [("mode_probe", "lenient"), ("mode_probe", "strict")]


async def test_th_035_tool_policy_sees_the_call_context() -> None:
    """TH-035: call id, tool, input, step, abort signal and the visible messages."""
    ns = run_example("tool_call_context")
    h = harness(
        [ScriptedStep.call("search", {"query": "a"}, id="c1"), ScriptedStep.reply("done")],
        parts=[ns["AuditToolCalls"]()],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    assert ns["AUDIT"] == [
        {
            "toolCallId": "c1",
            "toolName": "search",
            "source": "backend",
            "input": {"query": "a"},
            "stepNumber": 0,
            "messages": ["user"],
            "aborted": False,
        }
    ]


async def test_th_037_preliminary_results_stream_with_a_tool_policy_installed() -> None:
    """TH-037: with before_tool_call and after_tool_result installed, the tool's preliminary
    records are published before its final value and stay on its tool part."""
    ns = run_example("preliminary_results")
    policy = run_example("before_tool_call")
    analytics = run_example("after_tool_call")
    h = harness(
        [ScriptedStep.call("deep_search", {"query": "q"}, id="c1"), ScriptedStep.reply("done")],
        parts=[policy["ToolPolicy"](), analytics["ToolAnalytics"]()],
        tools=[*TOOLS, ns["deep_search"]],
    )
    assert (await h.run()).status == "completed"
    step = h.assistant()[0]
    chunks = h.sink.chunks(step["id"])
    kinds = [c["type"] for c in chunks]
    records = [c for c in chunks if c["type"] == "data-pai-tool-data"]
    assert len(records) == 6
    assert max(i for i, k in enumerate(kinds) if k == "data-pai-tool-data") < kinds.index(
        "tool-output-available"
    )
    assert [c["data"]["value"]["pct"] for c in records if c.get("transient")] == [33, 66, 100]
    part = next(p for p in project_tool_data(step)["parts"] if p.get("toolCallId") == "c1")
    assert part["output"] == {"found": ["docs: q", "issues: q", "forum: q"]}
    assert part["data"] == {
        "preliminary": [{"id": "latest", "value": {"found": part["output"]["found"]}}]
    }
    assert analytics["ANALYTICS"][0]["success"] is True


# -- completion ---------------------------------------------------------------------------


async def test_th_042_run_finished_starts_a_follow_up_turn() -> None:
    """TH-042: run_finished runs after the lease is released, so sending the next message
    from it works (no active-run conflict, no deadlock) and that run completes."""
    ns = run_example("follow_up")
    follow_ups: list[str] = []

    def send(thread_id: str, message: dict[str, Any]) -> None:
        follow_ups.append(h.store.send(thread_id, {"id": "u2", **message}))

    h = harness(
        [ScriptedStep.reply("I found 3 files"), ScriptedStep.reply("Summary")],
        parts=[ns["FollowUp"](send)],
    )
    first_run = h.run_id
    assert (await h.run()).status == "completed"
    assert len(follow_ups) == 1 and follow_ups[0] != first_run
    claim = await h.store.claim_run(follow_ups[0], owner="w", lease_seconds=30)
    outcome = await RunEngine(agent=h.agent, store=h.store, sink=h.sink).run_episode(claim)
    assert outcome.status == "completed"
    assert [text_of(m) for m in h.messages()] == [
        "hello",
        "I found 3 files",
        "Now summarize.",
        "Summary",
    ]


# -- headers ------------------------------------------------------------------------------


async def test_th_020_around_model_call_swaps_in_a_model_with_headers() -> None:
    """TH-020: the provider request of the swapped-in model carries its headers."""
    ns = run_example("headers")
    with FakeOpenAIServer(responses=[text_response("hi from the gateway")]) as server:
        async with OpenAIChatModel(
            model="fake-model",
            base_url=server.base_url,
            default_headers={"X-Request-Source": "docs"},
            max_retries=0,
        ) as tagged:
            h = harness(parts=[ns["TaggedCalls"](tagged)], tools=TOOLS)
            assert (await h.run()).status == "completed"
    assert server.exchanges[0].headers["x-request-source"] == "docs"
    assert server.requests[0]["messages"][0] == {"role": "system", "content": "be brief"}
    assert h.model.requests == []  # the agent's own model was not called
    assert text_of(h.assistant()[0]) == "hi from the gateway"


# -- extensions ---------------------------------------------------------------------------


class Primary(AgentLifecycle):
    name = "primary"

    def prepare_model_step(self, input: Any) -> None:
        return None

    def before_tool_call(self, input: Any) -> None:
        return None

    def after_step(self, input: Any) -> None:
        return None


async def test_th_045_th_046_th_047_extensions_observe_json_snapshots_after_the_primary() -> None:
    """TH-045: the extension runs after the primary part; TH-046: its hooks get
    JSON-serializable snapshots; TH-047: only before_turn's config is used."""
    ns = run_example("extensions")
    h = harness(
        [ScriptedStep.call("search", {"query": "a"}, id="c1"), ScriptedStep.reply("done")],
        parts=[Primary(), ns["EXTENSION"]],
        tools=TOOLS,
        runtime_context=lambda b: {"selected_file": "guide.md"},
    )
    assert (await h.run()).status == "completed"
    assert executed == [("search", "a:None")]  # before_tool_call's return was discarded
    assert [r.settings.get("temperature") for r in h.model.requests] == [0.2, 0.2]
    events = ns["ANALYTICS"].events
    json.dumps(events)  # every snapshot is JSON
    kinds = [kind for kind, _ in events]
    assert kinds.count("turn") == 1 and kinds.count("step") == 2
    turn = dict(events)["turn"]
    assert turn == {
        "system": "be brief",
        "toolNames": [t.name for t in TOOLS],
        "messageCount": 1,
        "continuation": False,
        "body": {"selected_file": "guide.md"},
        "modelId": "scripted",
    }
    assert dict(events)["tool"] == {
        "toolName": "search",
        "toolCallId": "c1",
        "input": {"query": "a"},
        "stepNumber": 0,
    }
    result = dict(events)["result"]
    assert result["success"] is True and result["output"] == "results for a"
    assert result["durationMs"] >= 0
    steps = [snapshot for kind, snapshot in events if kind == "step"]
    assert [(s["stepNumber"], s["finishReason"], s["toolCallCount"]) for s in steps] == [
        (0, "tool-calls", 1),
        (1, "stop", 0),
    ]
    assert steps[0]["toolResultCount"] == 1 and steps[1]["text"] == "done"
    assert set(steps[1]["usage"]) >= {"inputTokens", "outputTokens"}
    text = "".join(s["text"] for kind, s in events if kind == "chunk")
    assert text == "done"
    for phase in ("prepare_model_step", "before_tool_call", "after_step"):
        parts = [part for part, p in h.trace.calls if p == phase]
        assert parts[:2] == ["primary", "analytics"]


async def test_th_047_before_turn_config_is_scalar_and_episode_wide(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """TH-047: system, maxSteps and settings from before_turn apply to the episode; other
    keys are logged and ignored."""
    from pai_agents.lifecycle import observe

    extension = {"before_turn": lambda s: {"system": "X", "maxSteps": 1, "model": "gpt-9"}}
    h = harness(
        [ScriptedStep.call("search", {"query": "a"}), ScriptedStep.reply("never")],
        parts=[observe(extension, name="config")],
        tools=TOOLS,
    )
    with caplog.at_level(logging.WARNING, logger="pai.lifecycle"):
        assert (await h.run()).status == "completed"
    assert len(h.model.requests) == 1 and h.model.requests[0].system == "X"
    assert "'model'" in caplog.text and "config" in caplog.text


async def test_th_048_extension_errors_are_logged_and_do_not_abort_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """TH-048: a raising extension hook is logged (not client-visible, not a runtime error)
    and the run goes on unchanged."""
    from pai_agents.lifecycle import observe

    def boom(snapshot: Any) -> None:
        raise RuntimeError("extension bug 1234")

    reports: list[Any] = []
    hooks = ("before_turn", "before_tool_call", "after_tool_call", "on_step_finish", "on_chunk")
    h = harness(
        [ScriptedStep.call("search", {"query": "a"}), ScriptedStep.reply("done")],
        parts=[observe(dict.fromkeys(hooks, boom), name="flaky")],
        tools=TOOLS,
        on_runtime_error=reports.append,
    )
    with caplog.at_level(logging.WARNING, logger="pai.lifecycle"):
        assert (await h.run()).status == "completed"
    assert text_of(h.assistant()[-1]) == "done" and executed == [("search", "a:None")]
    assert reports == []
    assert "extension bug 1234" not in json.dumps(h.sink.events)
    failed = {r.getMessage() for r in caplog.records if r.name == "pai.lifecycle"}
    assert {f"extension 'flaky' failed in {hook}; the run goes on" for hook in hooks} <= failed
