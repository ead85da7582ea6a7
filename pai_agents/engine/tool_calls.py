"""Executing tool calls and settling the ones that cannot complete.

Every stored tool call the runtime owns ends with a result: executed, denied, or a synthetic
error whose ``toolMetadata.pai.source`` says why (``cancel``, ``recovery``), so a thread is
never left in a state a model provider rejects. Provider-executed calls are the provider's
(:mod:`pai_agents.engine.provider_calls`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pai_agents import tracing
from pai_agents.abort import AbortSignal
from pai_agents.engine.step_stream import PendingCall
from pai_agents.engine.store import ActionRequest
from pai_agents.ids import new_id
from pai_agents.messages.types import UIMessage, UIMessageChunk, UIMessagePart
from pai_agents.tools import ToolContext, ToolData, ToolError

if TYPE_CHECKING:
    from pai_agents.lifecycle.inputs import ToolExecutionEntry
    from pai_agents.lifecycle.suspensions import SuspensionEpisode

__all__ = [
    "ResultSource",
    "error_chunk",
    "execute_call",
    "open_tool_parts",
    "route_calls",
    "tool_name_of",
]

logger = logging.getLogger("pai.engine")

ResultSource = Literal["execute", "reject", "throw", "cancel", "recovery", "client", "manual"]

_SETTLE_TEXT = {
    "cancel": "The run was cancelled before this tool call finished.",
    "recovery": "The worker executing this tool call stopped; it was not completed.",
}


def error_chunk(tool_call_id: str, error_text: str, source: ResultSource) -> UIMessageChunk:
    return {
        "type": "tool-output-error",
        "toolCallId": tool_call_id,
        "errorText": error_text,
        "toolMetadata": {"pai": {"source": source}},
    }


def settle_chunk(tool_call_id: str, source: Literal["cancel", "recovery"]) -> UIMessageChunk:
    return error_chunk(tool_call_id, _SETTLE_TEXT[source], source)


def tool_name_of(part: UIMessagePart) -> str | None:
    kind = part.get("type", "")
    if kind == "dynamic-tool":
        return str(part.get("toolName"))
    if kind.startswith("tool-"):
        return kind[5:]
    return None


def open_tool_parts(message: UIMessage) -> Iterable[UIMessagePart]:
    """Tool parts without a final result (the states a provider would reject).

    Provider-executed parts are the provider's: the runtime never executes, settles or waits
    for them (LC-127), so they are never open here."""
    for part in message["parts"]:
        if part.get("providerExecuted") is True:
            continue
        if tool_name_of(part) is not None and part.get("state") in (
            "input-streaming",
            "input-available",
            "approval-requested",
            "approval-responded",
        ):
            yield part


async def execute_call(
    call: PendingCall,
    *,
    run_id: str,
    thread_id: str,
    identity: Any,
    runtime_context: Any,
    history: list[UIMessage],
    signal: AbortSignal,
    data: ToolData | None = None,
    capabilities: Mapping[str, Any] | None = None,
    entry: ToolExecutionEntry | None = None,
    suspend_history: Sequence[SuspensionEpisode] = (),
) -> UIMessageChunk:
    """Run one validated call; any failure becomes a model-visible ``tool-output-error``.

    ``data`` is the call's ToolData writer (``ctx.data``); without one, writes are only kept
    on the writer. ``entry`` and ``suspend_history``: a resumed suspension's (``ctx.entry``,
    ``ctx.suspend_history``). A returned ``ctx.suspend(...)`` comes back as the chunk's
    ``output`` (see :mod:`pai_agents.engine.suspensions`)."""
    tool, parsed, call_id = call.tool, call.parsed, call.tool_call_id
    context = ToolContext(
        tool_call_id=call_id,
        tool_name=tool.name,
        run_id=run_id,
        thread_id=thread_id,
        identity=identity,
        runtime_context=runtime_context,
        signal=signal,
        messages=list(history),  # type: ignore[arg-type]
        data=data if data is not None else ToolData(call_id),
        capabilities=capabilities or {},
        entry=entry,
        suspend_history=tuple(suspend_history),
        suspends=tool.suspends,
    )
    with tracing.tool_span(tool_name=tool.name, tool_call_id=call_id) as span:
        try:
            output = await tool.arun(parsed, context)
        except ToolError as exc:
            span.failed(type(exc).__name__)
            return error_chunk(call_id, str(exc), "throw")
        except Exception as exc:
            span.failed(type(exc).__name__)
            if signal.aborted:
                return settle_chunk(call_id, "cancel")
            logger.warning(
                "tool %s raised %s",
                tool.name,
                type(exc).__name__,
                extra={"run_id": run_id},
                exc_info=True,
            )
            # Unexpected exceptions may carry internals; only ToolError text is shown verbatim.
            return error_chunk(call_id, f"Tool {tool.name} failed ({type(exc).__name__}).", "throw")
    return {"type": "tool-output-available", "toolCallId": call_id, "output": output}


def route_calls(
    calls: list[PendingCall],
) -> tuple[list[PendingCall], list[ActionRequest], list[UIMessageChunk]]:
    """Split a step's validated calls: those the server executes now, and those that wait
    for a person (approval) or a client (no ``execute``) as pending actions, with the
    ``tool-approval-request`` chunks that show the approvals."""
    server: list[PendingCall] = []
    actions: list[ActionRequest] = []
    for call in calls:
        kind: Literal["approval", "client"]
        if call.tool.needs_approval:
            kind = "approval"
        elif call.tool.execute is None:
            kind = "client"
        else:
            server.append(call)
            continue
        actions.append(
            ActionRequest(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool.name,
                kind=kind,
                input=call.input,
                approval_id=new_id("apr") if kind == "approval" else None,
            )
        )
    # Approvals first, as before: their chunks and actions keep the step's call order.
    actions.sort(key=lambda action: action.kind != "approval")
    chunks: list[UIMessageChunk] = [
        {"type": "tool-approval-request", "approvalId": a.approval_id, "toolCallId": a.tool_call_id}
        for a in actions
        if a.kind == "approval"
    ]
    return server, actions, chunks
