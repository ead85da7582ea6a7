"""The examples of docs/coming-from-think.md, executed from the page and run in an agent.

Each ``<!-- example: name -->`` block is exec'd as written; the tests then drive RunEngine
with what it defines and check the peer behaviour it claims (TH rules).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from lce_support import executed, harness, text_of
from pydantic import BaseModel

from pai_agents import ScriptedModel, ScriptedStep, tool
from pai_agents.models.base import ModelError

DOC = Path(__file__).resolve().parents[3] / "docs" / "coming-from-think.md"
_BLOCK = re.compile(r"<!-- example: (\w+) -->\s*```python\n(.*?)```", re.DOTALL)


def examples() -> dict[str, str]:
    return dict(_BLOCK.findall(DOC.read_text()))


def run_example(name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"docs_example_{name}"}
    exec(compile(examples()[name], f"{DOC}:{name}", "exec"), namespace)
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
    assert executed == [("search", "q:50"), ("weather", "Oslo")]
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
