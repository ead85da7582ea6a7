"""Per-tool registrations: enabled, map_context, on_output (AD-055..AD-069)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from pai_agents import ScriptedStep, ToolContext, define_agent, tool
from pai_agents.agent import ToolConfig
from pai_agents.lifecycle import ReplaceMessage, ReplaceOutput, Skip
from tests.support.engine_harness import Answer, Args, executed, harness, typed


class Q(BaseModel):
    q: str = ""


seen_contexts: list[Any] = []


@tool(input=Q)
def activity(args: Q, ctx: ToolContext) -> str:
    """Recent activity."""
    seen_contexts.append(ctx.context)
    executed.append(("activity", args.q))
    return "recent"


async def test_ad_055_ad_056_ad_057_disabled_tools_are_hidden_and_cannot_execute() -> None:
    """AD-055..AD-058, TH-011: enabled is evaluated per step from the runtime context; a disabled
    tool is not advertised, a forged call to it does not execute, the manifest lists it."""
    checks: list[Any] = []

    def enabled(behavior: Any) -> bool:
        checks.append(behavior.runtime_context)
        return bool(behavior.runtime_context["can_read_activity"])

    h = harness(
        [ScriptedStep.call("activity", {"q": "x"}), ScriptedStep.reply("ok")],
        tools=[ToolConfig(tool=activity, enabled=enabled)],
        runtime_context=lambda b: {"can_read_activity": False},
    )
    assert h.agent.lifecycle is None and h.agent.tool_configs
    assert (await h.run()).status == "completed"
    assert executed == []
    assert [r.tools for r in h.model.requests] == [[], []]
    assert len(checks) == 2  # once per model step
    assert [t["name"] for t in h.agent.manifest()["tools"]] == ["activity"]


async def test_ad_059_map_context_is_the_tools_context() -> None:
    """AD-059, AD-070: the tool's ctx.context is the mapped value, never stored."""
    seen_contexts.clear()
    h = harness(
        [ScriptedStep.call("activity", {"q": "x"}), ScriptedStep.reply("ok")],
        tools=[
            ToolConfig(
                tool=activity,
                map_context=lambda b: {"user_id": b.runtime_context["user"]["id"]},
            )
        ],
        runtime_context=lambda b: {"user": {"id": "u-7", "token": "secret"}},
    )
    await h.run()
    assert seen_contexts == [{"user_id": "u-7"}]
    assert "secret" not in str(h.messages()) and "secret" not in str(h.sink.events)


async def test_ad_064_ad_067_on_output_gets_typed_values_after_after_tool_result() -> None:
    """AD-064, AD-065, AD-067: typed input/output, registration name, call id; it sees the
    output after_tool_result produced; its return value changes nothing."""
    outputs: list[Any] = []

    def on_output(input: Any) -> str:
        outputs.append(input)
        return "ignored"

    h = harness(
        [ScriptedStep.call("typed", {"q": "a"}, id="t1"), ScriptedStep.reply("ok")],
        tools=[ToolConfig(tool=typed, on_output=on_output)],
        parts=[{"after_tool_result": lambda i: ReplaceOutput({"value": "rewritten"})}],
    )
    await h.run()
    [seen] = outputs
    assert isinstance(seen.input, Args) and seen.input.q == "a"
    assert isinstance(seen.output, Answer) and seen.output.value == "rewritten"
    assert (seen.tool_name, seen.tool_call_id) == ("typed", "t1")
    part = next(p for p in h.assistant()[0]["parts"] if p.get("toolCallId") == "t1")
    assert part["output"] == {"value": "rewritten"}


async def test_ad_065_ad_066_on_output_for_skips_not_for_errors() -> None:
    """AD-065: a skipped call's synthetic output reaches on_output; AD-066: an output that
    after_tool_result turned into an error does not."""
    outputs: list[Any] = []
    h = harness(
        [ScriptedStep.call("typed", {"q": "a"}), ScriptedStep.reply("ok")],
        tools=[ToolConfig(tool=typed, on_output=outputs.append)],
        parts=[{"before_tool_call": lambda i: Skip({"value": "cached"})}],
    )
    await h.run()
    assert [o.output.value for o in outputs] == ["cached"] and executed == []

    outputs.clear()
    h = harness(
        [ScriptedStep.call("typed", {"q": "a"}), ScriptedStep.reply("ok")],
        tools=[ToolConfig(tool=typed, on_output=outputs.append)],
        parts=[{"after_tool_result": lambda i: ReplaceMessage("hidden")}],
    )
    await h.run()
    assert outputs == []


async def test_ad_068_on_output_failure_fails_the_run_reported_and_redacted() -> None:
    """AD-068: an exception in on_output fails the run; reported, not shown to clients."""
    reports: list[Any] = []

    def broken(input: Any) -> None:
        raise RuntimeError("on_output internals")

    h = harness(
        [ScriptedStep.call("typed", {"q": "a"}), ScriptedStep.reply("ok")],
        tools=[ToolConfig(tool=typed, on_output=broken)],
        on_runtime_error=reports.append,
    )
    assert (await h.run()).status == "failed"
    assert isinstance(reports[0].error, RuntimeError)
    assert "on_output internals" not in str(h.sink.events)


def test_ad_061_a_configured_tool_registers_its_inner_tool() -> None:
    """AD-061: a ToolConfig contributes the inner tool as if registered directly."""
    agent = define_agent(
        "cfg", instructions="x", model=lambda b: None, tools=[ToolConfig(tool=activity)]
    )
    assert agent.tools == {"activity": activity}
    assert agent.manifest()["tools"][0]["name"] == "activity"
