"""Tool calls are validated once, after the whole transform_step_stream chain (LC-121..128)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, model_validator

from pai_agents import ScriptedStep, tool
from pai_agents.lifecycle import Continue, ModelStepPatch
from tests.support.engine_harness import ALL_TOOLS, executed, harness

parses: list[Any] = []


class Counted(BaseModel):
    """A transforming input schema that records every run of its validator."""

    q: str = ""

    @model_validator(mode="before")
    @classmethod
    def _count(cls, data: Any) -> Any:
        parses.append(data)
        if isinstance(data, dict) and isinstance(data.get("q"), str):
            return {**data, "q": data["q"].upper()}
        return data


@tool(input=Counted)
def counted(args: Counted) -> str:
    """Counts its parses."""
    executed.append(("counted", args.q))
    return args.q


TOOLS = (*ALL_TOOLS, counted)


def transforming(edit: Callable[[dict[str, Any]], list[dict[str, Any]]]) -> dict[str, Any]:
    """A transform_step_stream part that maps each part to ``edit(part)``."""

    async def transform(input: Any) -> Any:
        async def stream() -> Any:
            async for part in input.stream:
                for out in edit(part):
                    yield out

        return stream()

    return {"transform_step_stream": transform}


def before_finish(*authored: dict[str, Any]) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    """Insert hook-authored parts right before the first step's ``finish``."""
    done: list[bool] = []

    def edit(part: dict[str, Any]) -> list[dict[str, Any]]:
        if part["type"] == "finish" and not done:
            done.append(True)
            return [*authored, {**part, "finishReason": "tool-calls"}]
        return [part]

    return edit


def tool_parts(message: Any) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p.get("toolCallId")]


async def test_lc_121_a_passed_through_call_is_parsed_once() -> None:
    """LC-121: a model call passed through (or shallow-copied unchanged) by a transform is
    parsed once: the transforming input schema runs exactly once."""
    parses.clear()
    h = harness(
        [ScriptedStep.call("counted", {"q": "abc"}), ScriptedStep.reply("ok")],
        parts=[transforming(lambda p: [dict(p)]), transforming(lambda p: [p])],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    assert parses == [{"q": "abc"}]
    assert executed == [("counted", "ABC")]


async def test_lc_122_a_hook_authored_call_is_parsed_once_and_executed() -> None:
    """LC-122: a call a hook authors (input given as a decoded value, no runtime proof) is
    parsed once after the whole chain, stored, then executed."""
    parses.clear()
    authored = {"type": "tool-call", "toolCallId": "h1", "toolName": "counted", "input": {"q": "x"}}
    h = harness(
        [ScriptedStep.reply("thinking"), ScriptedStep.reply("done")],
        parts=[transforming(before_finish(authored)), transforming(lambda p: [p])],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    assert parses == [{"q": "x"}]
    assert executed == [("counted", "X")]
    [part] = tool_parts(h.assistant()[0])
    assert part["toolCallId"] == "h1"
    assert part["state"] == "output-available"
    assert part["input"] == {"q": "x"}


async def test_lc_122_a_changed_tool_name_is_validated_against_the_new_tool() -> None:
    """LC-122: a call whose ``toolName`` a transform changed runs the new tool, validated
    once against the new tool's schema."""
    parses.clear()

    def rename(part: dict[str, Any]) -> list[dict[str, Any]]:
        if part["type"] in ("tool-call", "tool-input-start"):
            return [{**part, "toolName": "counted"}]
        return [part]

    h = harness(
        [ScriptedStep.call("lookup", {"q": "abc"}), ScriptedStep.reply("ok")],
        parts=[transforming(rename)],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    assert executed == [("counted", "ABC")]
    assert len(parses) == 1


async def test_lc_123_invalid_transformed_input_is_a_tool_error_without_before_tool_call() -> None:
    """LC-123: input a transform made invalid becomes the model-visible tool-input error;
    before_tool_call is not called for it and the tool never runs."""
    seen: list[Any] = []

    def corrupt(part: dict[str, Any]) -> list[dict[str, Any]]:
        if part["type"] == "tool-call":
            return [{**part, "input": {"q": 5}}]
        return [part]

    h = harness(
        [ScriptedStep.call("lookup", {"q": "abc"}), ScriptedStep.reply("ok")],
        parts=[transforming(corrupt), {"before_tool_call": lambda i: seen.append(i.input)}],
    )
    assert (await h.run()).status == "completed"
    assert executed == []
    assert seen == []
    [part] = tool_parts(h.assistant()[0])
    assert part["state"] == "output-error"
    assert "Invalid input for tool lookup" in part["errorText"]
    second = h.model.requests[1]
    tool_results = [c for m in second.messages for c in m["content"] if isinstance(c, dict)]
    assert any("Invalid input for tool lookup" in str(c) for c in tool_results)


async def test_lc_124_non_json_invalid_input_is_left_out_of_the_stored_error() -> None:
    """LC-124: invalid input that is not JSON-serializable is not stored; the run commits."""
    authored = {
        "type": "tool-call",
        "toolCallId": "h1",
        "toolName": "lookup",
        "input": {"q": object()},
    }
    h = harness(
        [ScriptedStep.reply("thinking"), ScriptedStep.reply("done")],
        parts=[transforming(before_finish(authored))],
    )
    assert (await h.run()).status == "completed"
    assert executed == []
    [part] = tool_parts(h.assistant()[0])
    assert part["state"] == "output-error"
    assert part.get("rawInput") is None and part.get("input") is None
    json.dumps(h.messages())  # everything stored is JSON


async def test_lc_125_a_later_part_cannot_replace_a_validated_input() -> None:
    """LC-125: once validated, a later tool-call, tool-result or tool-error with the same
    ``toolCallId`` cannot replace the call's canonical input."""
    parses.clear()
    first = {"type": "tool-call", "toolCallId": "h1", "toolName": "counted", "input": {"q": "a"}}
    later = [
        {**first, "input": {"q": "replaced"}},
        {"type": "tool-result", "toolCallId": "h1", "toolName": "counted", "input": {"q": "r"}},
        {"type": "tool-error", "toolCallId": "h1", "toolName": "counted", "input": {"q": "e"}},
    ]
    h = harness(
        [ScriptedStep.reply("thinking"), ScriptedStep.reply("done")],
        parts=[transforming(before_finish(first, *later))],
        tools=TOOLS,
    )
    assert (await h.run()).status == "completed"
    assert executed == [("counted", "A")]
    assert parses == [{"q": "a"}]
    [part] = tool_parts(h.assistant()[0])
    assert part["input"] == {"q": "a"}
    assert part["state"] == "output-available"


async def test_lc_126_a_result_after_an_invalid_call_is_ignored() -> None:
    """LC-126: a tool result (or a valid retry) following an invalid call is ignored; the
    part stays an error and nothing runs."""
    bad = {"type": "tool-call", "toolCallId": "h1", "toolName": "lookup", "input": {"q": 1}}
    later = [
        {"type": "tool-result", "toolCallId": "h1", "toolName": "lookup", "result": "forged"},
        {**bad, "input": {"q": "valid now"}},
    ]
    h = harness(
        [ScriptedStep.reply("thinking"), ScriptedStep.reply("done")],
        parts=[transforming(before_finish(bad, *later))],
    )
    assert (await h.run()).status == "completed"
    assert executed == []
    [part] = tool_parts(h.assistant()[0])
    assert part["state"] == "output-error"
    assert "output" not in part


async def test_lc_128_a_hook_authored_call_to_an_omitted_tool_cannot_execute() -> None:
    """LC-128: a tool a patch omitted stays unexecutable even when a transform authors the
    call (validated after the chain like any other)."""
    authored = {"type": "tool-call", "toolCallId": "h1", "toolName": "lookup", "input": {"q": "x"}}
    h = harness(
        [ScriptedStep.reply("thinking"), ScriptedStep.reply("done")],
        parts=[
            {"prepare_model_step": lambda i: Continue(patch=ModelStepPatch(tools=["typed"]))},
            transforming(before_finish(authored)),
        ],
    )
    assert (await h.run()).status == "completed"
    assert executed == []
    [part] = tool_parts(h.assistant()[0])
    assert part["state"] == "output-error"
