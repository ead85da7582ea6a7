"""The end of a model step that called tools, and ``after_step``.

Calls the runtime will not run are refused first, each with a model-visible error result:
all of them when the step was cut by the output limit (finish reason ``length``: the last
call may be cut short and the model did not finish its turn), and those beyond the run's
``max_tool_calls_per_step``. The others pass ``before_tool_call``; those left are split into
server calls and calls that wait for a person or a client. The step is committed with every
call recorded before any runs (at-most-once), the server calls execute, their results pass
``after_tool_result`` (those that returned ``ctx.suspend(...)`` wait instead, as pending
actions of kind ``input``), and the step ends: waiting on pending actions, cancelled,
completed, or on to the next step.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from typing import TYPE_CHECKING

from pai_agents.engine.endings import end_tool_results, finished
from pai_agents.engine.generation import Generation, end_chunks
from pai_agents.engine.run_state import RunState
from pai_agents.engine.step_facts import StepReport, max_steps_reached
from pai_agents.engine.step_stream import PendingCall
from pai_agents.engine.store import RunOutcome, StepRecord
from pai_agents.engine.suspensions import split_suspended
from pai_agents.engine.tool_calls import error_chunk, route_calls, settle_chunk, tool_name_of
from pai_agents.engine.tool_hooks import after_tool, before_tool
from pai_agents.engine.tool_runs import run_tools
from pai_agents.lifecycle.facade import LifecycleMessage, MessageVisibility
from pai_agents.lifecycle.inputs import AfterStepInfo, AfterStepInput, StepInfo, StepToolCall
from pai_agents.lifecycle.results import Complete, NextStep
from pai_agents.messages.types import UIMessage, UIMessageChunk

if TYPE_CHECKING:
    from pai_agents.lifecycle.request import ModelStepRequest

__all__ = ["LENGTH_REFUSAL", "after_step", "finish_tool_step", "refuse_calls"]

logger = logging.getLogger("pai.engine")

LENGTH_REFUSAL = (
    "Not executed: your previous output was cut off by the output token limit (finish "
    "reason 'length'), so this call may be incomplete. Call it again if it is still needed."
)


def _over_limit_text(limit: int) -> str:
    return (
        f"Not executed: at most {limit} tool calls run per step and this call came after "
        f"them. Call it again in a later step if it is still needed."
    )


def refuse_calls(
    calls: list[PendingCall], finish_reason: str, limit: int
) -> tuple[list[PendingCall], list[tuple[UIMessageChunk, PendingCall]]]:
    """Split a step's calls into those that may run and the refused ones with their error
    result (source ``reject``): every call of a ``length``-cut step, and those beyond
    ``limit``."""
    if finish_reason == "length":
        return [], [(error_chunk(c.tool_call_id, LENGTH_REFUSAL, "reject"), c) for c in calls]
    if len(calls) <= limit:
        return calls, []
    text = _over_limit_text(limit)
    return calls[:limit], [(error_chunk(c.tool_call_id, text, "reject"), c) for c in calls[limit:]]


async def finish_tool_step(
    state: RunState,
    step: StepInfo,
    generation: Generation,
    report: StepReport,
    record: StepRecord,
    request: ModelStepRequest,
) -> RunOutcome | None:
    """Commit the step with its calls, run them, and end the step (see the module doc)."""
    lease = state.lease
    allowed, decided = refuse_calls(
        list(report.translator.calls), report.finish_reason, state.max_tool_calls_per_step
    )
    if decided:
        logger.warning(
            "run %s step %d: %d tool call(s) not executed (finish reason %s, limit %d)",
            lease.run_id,
            step.index,
            len(decided),
            report.finish_reason,
            state.max_tool_calls_per_step,
            extra={"run_id": lease.run_id},
        )
        record = dataclasses.replace(
            record, request={**record.request, "toolCallsRefused": len(decided)}
        )
    if step.index + 1 >= state.episode.max_steps:
        # The model asked for tools in the last step the budget allows: it will not see
        # their results unless the run waits (and is resumed) on some of them.
        record = max_steps_reached(record)
    calls: list[PendingCall] = []
    for pending_call in allowed:
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
    # A call whose execute returned ctx.suspend(...) has no result yet (LC-140): it waits.
    finals, suspended = split_suspended(raw, server_calls, state.suspensions)
    actions += suspended
    results = [await after_tool(state, step, chunk, c.tool.name, c.input) for chunk, c in decided]
    results += [
        await after_tool(state, step, chunk, c.tool.name, c.input, duration_ms=ms)
        for chunk, ms, c in finals
    ]
    await generation.emit(*results)
    after = await after_step(state, step, generation.message, report, request)
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
        inputs = {c.tool_call_id: c.input for c in calls}  # an input action's is its payload
        cancelled = [
            await after_tool(
                state,
                step,
                settle_chunk(a.tool_call_id, "cancel"),
                a.tool_name,
                inputs.get(a.tool_call_id, a.input),
            )
            for a in actions
        ]
        await generation.emit(*cancelled)
    await generation.emit(*end_chunks(_calls_finish_reason(report.finish_reason)))
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
    report: StepReport,
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
                finish_reason=report.finish_reason,
                tool_calls=calls,
                # TH-039: the provider's own metadata; the response's id/model apart.
                provider_metadata=report.facts.provider_metadata,
                usage=report.usage,
                raw_finish_reason=report.facts.raw_finish_reason,
                warnings=tuple(report.facts.warnings),
                request_metadata=report.request_metadata(),
                response_metadata=report.translator.response or None,
            ),
            request=request,
        )
    )
    return result if isinstance(result, NextStep | Complete) else None


def _calls_finish_reason(reason: str) -> str:
    """A step with calls ends ``tool-calls`` unless the stream said why it really stopped
    (``length``, ``content-filter``, ...): that reason is what clients must see."""
    return "tool-calls" if reason in ("stop", "other") else reason


def _frozen_message(message: UIMessage) -> LifecycleMessage:
    return LifecycleMessage(
        id=message["id"],
        role=message["role"],
        parts=tuple(copy.deepcopy(message["parts"])),
        metadata=copy.deepcopy(dict(message.get("metadata") or {})),
        visibility=MessageVisibility(),
    )
