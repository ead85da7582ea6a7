"""The end of a model step that called tools, and ``after_step``.

The calls pass ``before_tool_call``; those left are split into server calls and calls that
wait for a person or a client. The step is committed with every call recorded before any
runs (at-most-once), the server calls execute, their results pass ``after_tool_result``, and
the step ends: waiting on pending actions, cancelled, completed, or on to the next step.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from pai_agents.engine.endings import end_tool_results, finished
from pai_agents.engine.generation import Generation, end_chunks
from pai_agents.engine.run_state import RunState
from pai_agents.engine.step_stream import PendingCall, StepTranslator
from pai_agents.engine.store import RunOutcome, StepRecord
from pai_agents.engine.tool_calls import route_calls, settle_chunk, tool_name_of
from pai_agents.engine.tool_hooks import after_tool, before_tool
from pai_agents.engine.tool_runs import run_tools
from pai_agents.lifecycle.facade import LifecycleMessage, MessageVisibility
from pai_agents.lifecycle.inputs import AfterStepInfo, AfterStepInput, StepInfo, StepToolCall
from pai_agents.lifecycle.results import Complete, NextStep
from pai_agents.messages.types import UIMessage, UIMessageChunk

if TYPE_CHECKING:
    from pai_agents.lifecycle.request import ModelStepRequest

__all__ = ["after_step", "finish_tool_step"]


async def finish_tool_step(
    state: RunState,
    step: StepInfo,
    generation: Generation,
    translator: StepTranslator,
    record: StepRecord,
    request: ModelStepRequest,
) -> RunOutcome | None:
    """Commit the step with its calls, run them, and end the step (see the module doc)."""
    lease = state.lease
    decided: list[tuple[UIMessageChunk, PendingCall]] = []
    calls: list[PendingCall] = []
    for pending_call in translator.calls:
        routed = await before_tool(state, step, pending_call)
        if isinstance(routed, PendingCall):
            state.parsed[routed.tool_call_id] = routed.parsed
            calls.append(routed)
        else:
            decided.append((routed, pending_call))
    server_calls, actions, approval_chunks = route_calls(calls)
    await generation.emit(*approval_chunks)
    # At-most-once tools: the calls are durable before any of them runs.
    await state.store.commit_step(
        lease, message=generation.message, step=record, replace_open=generation.checkpointed
    )
    raw = await run_tools(state, server_calls, generation)
    results = [await after_tool(state, step, chunk, c.tool.name, c.input) for chunk, c in decided]
    results += [
        await after_tool(state, step, chunk, c.tool.name, c.input, duration_ms=ms)
        for (chunk, ms), c in zip(raw, server_calls, strict=True)
    ]
    await generation.emit(*results)
    after = await after_step(state, step, generation.message, translator, request)
    if actions and not isinstance(after, Complete):  # LC-146: waiting wins
        await generation.emit({"type": "finish-step"})
        await state.store.suspend(
            lease, message=generation.message, actions=actions, usage=state.usage
        )
        waiting = RunOutcome(status="waiting", usage=state.usage)
        await finished(state, generation.message, waiting)
        return waiting
    if actions:
        # LC-148: complete cancels the waiting calls in the completing transaction.
        cancelled = [
            await after_tool(
                state, step, settle_chunk(a.tool_call_id, "cancel"), a.tool_name, a.input
            )
            for a in actions
        ]
        await generation.emit(*cancelled)
    await generation.emit(*end_chunks("tool-calls"))
    state.history.append(generation.message)
    last_step = isinstance(after, Complete) or step.index + 1 >= state.episode.max_steps
    outcome = await end_tool_results(state, generation, last_step=last_step)  # LC-147
    if outcome is None and isinstance(after, NextStep):
        state.episode.overlay.apply(after.patch)
    return outcome


async def after_step(
    state: RunState,
    step: StepInfo,
    message: UIMessage,
    translator: StepTranslator,
    request: ModelStepRequest,
) -> NextStep | Complete | None:
    """LC-143: after the message is assembled, before the transition commits."""
    if "after_step" not in state.phases:
        return None
    frozen = _frozen_message(message)  # LC-149: edits cannot reach the stored message
    calls = tuple(
        StepToolCall(
            tool_call_id=str(p.get("toolCallId")),
            tool_name=tool_name_of(p) or "",
            input=p.get("input"),
        )
        for p in message["parts"]
        if tool_name_of(p) is not None
    )
    result = await state.lifecycle.after_step(
        AfterStepInput(
            **state.hook_base(),
            step=AfterStepInfo(
                step_id=step.step_id,
                index=step.index,
                message=frozen,
                finish_reason=translator.finish_reason,
                tool_calls=calls,
                provider_metadata=translator.response or None,
                usage=translator.usage,
            ),
            request=request,
        )
    )
    return result if isinstance(result, NextStep | Complete) else None


def _frozen_message(message: UIMessage) -> LifecycleMessage:
    return LifecycleMessage(
        id=message["id"],
        role=message["role"],
        parts=tuple(copy.deepcopy(message["parts"])),
        metadata=copy.deepcopy(dict(message.get("metadata") or {})),
        visibility=MessageVisibility(),
    )
