"""The tool phases of the lifecycle around every call: before_tool_call, after_tool_result,
and a configured tool's ``on_output``.

Every final result the engine produces (executed, skipped, rejected, denied, submitted by a
client, settled by recovery) passes :func:`after_tool` before the model sees it. Each hook
is called only when overridden: a plain agent's results pass straight through.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from pai_agents._callables import call_user
from pai_agents.agent import ToolConfig, ToolOutputInput
from pai_agents.engine.run_state import RunState
from pai_agents.engine.step_stream import PendingCall
from pai_agents.engine.tool_calls import error_chunk
from pai_agents.lifecycle.inputs import (
    AfterToolResultInput,
    BeforeToolCallInput,
    InitialEntry,
    StepInfo,
    ToolCallInfo,
    ToolExecutionEntry,
    ToolInfo,
)
from pai_agents.lifecycle.results import (
    Reject,
    ReplaceInput,
    Skip,
    ToolResult,
    ToolResultSource,
    apply_tool_result,
)
from pai_agents.mcp.tools import MCPTool
from pai_agents.messages.types import UIMessageChunk
from pai_agents.subagents import SubagentTool

__all__ = ["after_tool", "before_tool"]

_RESULT_TYPES = frozenset({"tool-output-available", "tool-output-error"})


def _tool_input(
    state: RunState, step: StepInfo, call_id: str, name: str, value: Any, entry: ToolExecutionEntry
) -> dict[str, Any]:
    tool = state.agent.tools.get(name)
    source: Literal["backend", "client", "mcp", "subagent"] = (
        "mcp"
        if isinstance(tool, MCPTool)
        else "subagent"
        if isinstance(tool, SubagentTool)
        else "client"
        if tool is not None and tool.execute is None
        else "backend"
    )
    return {
        **state.hook_base(),
        "step": step,
        "tool": ToolInfo(name=name, source=source, description=tool.description if tool else None),
        "call": ToolCallInfo(tool_call_id=call_id),
        "input": value,
        "entry": entry,
        "suspend_history": state.suspensions.get(call_id, ()),
    }


async def before_tool(
    state: RunState, step: StepInfo, call: PendingCall, entry: ToolExecutionEntry | None = None
) -> PendingCall | UIMessageChunk:
    """LC-131..LC-136: the call to run (maybe with new input) or its final result."""
    if "before_tool_call" not in state.phases:
        return call
    decision = await state.lifecycle.before_tool_call(
        BeforeToolCallInput(
            **_tool_input(
                state, step, call.tool_call_id, call.tool.name, call.input, entry or InitialEntry()
            )
        )
    )
    if isinstance(decision, Skip):  # LC-135: validated against the output schema
        return {
            "type": "tool-output-available",
            "toolCallId": call.tool_call_id,
            "output": call.tool.serialize_output(decision.output),
            "toolMetadata": {"pai": {"source": "skip"}},
        }
    if isinstance(decision, Reject):  # LC-136
        return error_chunk(call.tool_call_id, decision.message, "reject")
    if isinstance(decision, ReplaceInput):  # LC-134
        parsed = call.tool.parse_input(decision.input)
        return PendingCall(
            tool_call_id=call.tool_call_id,
            tool=call.tool,
            input=parsed.model_dump(mode="json"),
            parsed=parsed,
        )
    return call


async def after_tool(
    state: RunState,
    step: StepInfo,
    chunk: UIMessageChunk,
    name: str,
    value: Any,
    *,
    default_source: ToolResultSource = "execute",
    entry: ToolExecutionEntry | None = None,
    duration_ms: float | None = None,
) -> UIMessageChunk:
    """after_tool_result, then the tool's ``on_output`` on a settled output (AD-064)."""
    final = await _after_tool_result(
        state,
        step,
        chunk,
        name,
        value,
        default_source=default_source,
        entry=entry,
        duration_ms=duration_ms,
    )
    config = state.agent.tool_configs.get(name)
    if (
        config is not None
        and config.on_output is not None
        and final.get("type") == "tool-output-available"
    ):
        await _on_output(state, config, final, name, value)
    return final


async def _on_output(
    state: RunState, config: ToolConfig, chunk: UIMessageChunk, name: str, value: Any
) -> None:
    """AD-064..AD-069: typed, awaited before the model sees it; return value ignored."""
    tool = config.tool
    output = chunk.get("output")
    if tool.output_model is not None:
        output = tool.output_model.model_validate(output)
    call_id = str(chunk.get("toolCallId"))
    parsed = state.parsed.get(call_id)  # LC-121: parsed once; again only if never seen
    behavior = state.behavior
    await call_user(
        cast(Any, config.on_output),
        ToolOutputInput(
            identity=behavior.identity,
            client_data=behavior.client_data,
            runtime_context=behavior.runtime_context,
            thread_id=behavior.thread_id,
            run_id=behavior.run_id,
            signal=behavior.signal,
            input=tool.parse_input(value) if parsed is None else parsed,
            output=output,
            tool_name=name,
            tool_call_id=call_id,
        ),
    )


async def _after_tool_result(
    state: RunState,
    step: StepInfo,
    chunk: UIMessageChunk,
    name: str,
    value: Any,
    *,
    default_source: ToolResultSource,
    entry: ToolExecutionEntry | None,
    duration_ms: float | None,
) -> UIMessageChunk:
    """LC-137..LC-141: every final result passes after_tool_result before the model."""
    if "after_tool_result" not in state.phases or chunk.get("type") not in _RESULT_TYPES:
        return chunk
    metadata = chunk.get("toolMetadata")
    pai = (metadata.get("pai") or {}) if isinstance(metadata, Mapping) else {}
    source = cast(ToolResultSource, pai.get("source") or default_source)
    if chunk["type"] == "tool-output-available":
        result = ToolResult(status="output-available", source=source, output=chunk["output"])
    else:
        result = ToolResult(
            status="output-error", source=source, message=str(chunk.get("errorText", ""))
        )
    call_id = str(chunk["toolCallId"])
    decision = await state.lifecycle.after_tool_result(
        AfterToolResultInput(
            **_tool_input(state, step, call_id, name, value, entry or InitialEntry()),
            result=result,
            duration_ms=duration_ms,
        )
    )
    if decision is None:
        return chunk
    final = apply_tool_result(result, decision)
    if final.status == "output-available":
        tool = state.agent.tools.get(name)
        output = tool.serialize_output(final.output) if tool else final.output
        replaced: UIMessageChunk = {
            "type": "tool-output-available",
            "toolCallId": call_id,
            "output": output,
        }
        if source != "execute":
            replaced["toolMetadata"] = {"pai": {"source": source}}
        return replaced
    return error_chunk(call_id, final.message or "", cast(Any, source))
