"""Resuming what a previous episode left in the run's last message.

Answered approvals execute (marked as executing first: at most once), denied ones become
``output-denied``, client-submitted or manually fulfilled results are validated (LC-142),
calls a dead worker was executing become recovery errors (or run again when the tool is
idempotent). Answered input suspensions re-enter ``execute`` with their answer, and may
suspend again (docs/suspensions.md). Every final result passes the tool hooks with its
source (LC-133, LC-137).
The continuation restates each answered approval (``tool-approval-response``) before the
results, so a client folding it onto the message as it streamed rebuilds the stored one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pai_agents.engine.endings import end_tool_results, finished
from pai_agents.engine.generation import Generation
from pai_agents.engine.run_state import TOOL_PHASES, RunState
from pai_agents.engine.step_stream import PendingCall
from pai_agents.engine.store import RunOutcome
from pai_agents.engine.suspensions import (
    input_entry,
    latest_input,
    load_suspend_history,
    split_suspended,
)
from pai_agents.engine.tool_calls import error_chunk, open_tool_parts, settle_chunk, tool_name_of
from pai_agents.engine.tool_enablement import is_enabled
from pai_agents.engine.tool_hooks import after_tool, before_tool
from pai_agents.engine.tool_runs import run_tools
from pai_agents.ids import new_id
from pai_agents.lifecycle.inputs import ResumeEntry, StepInfo
from pai_agents.lifecycle.suspensions import SuspensionEpisode
from pai_agents.messages.types import UIMessage, UIMessageChunk, UIMessagePart
from pai_agents.tools import Tool

__all__ = ["episode_calls", "preload_suspensions", "resume_last_message"]


async def resume_last_message(state: RunState, message: UIMessage) -> RunOutcome | None:
    """Settle ``message``'s open tool calls; the run's outcome if that ended it."""
    claim = state.claim
    step = StepInfo(step_id=new_id("stp"), index=max(claim.step_count - 1, 0))
    chunks: list[UIMessageChunk] = []
    to_execute: list[PendingCall] = []
    approved: list[str] = []
    resumed: dict[str, ResumeEntry] = {}
    answered: dict[str, Mapping[str, Any]] = {}  # client/manual results, by call id
    inputs: dict[str, tuple[str, Any]] = {}
    answers: list[UIMessageChunk] = []  # the answered approvals, restated first
    for part in message["parts"]:
        name = tool_name_of(part)
        if name is None or part.get("providerExecuted") is True:
            continue  # a provider-executed result is the provider's, not a client's
        inputs[str(part.get("toolCallId"))] = (name, part.get("input"))
        pai = (part.get("toolMetadata") or {}).get("pai") or {}
        tool = state.agent.tools.get(name)
        if (
            tool is not None
            and tool.execute is None
            and not tool.needs_approval
            and part.get("state") in ("output-available", "output-error")
            and pai.get("source") in (None, "client", "manual")
        ):
            # A client-submitted or manually fulfilled result: validated (LC-142), then
            # after_tool_result with its source (LC-137, LC-138). Without a tool hook, a
            # valid result stays as submitted; one that fails validation becomes an error.
            result = _client_result(part, tool, pai.get("source") or "client")
            if state.phases & TOOL_PHASES or _rejected(part, result):
                chunks.append(result)
                answered[str(part.get("toolCallId"))] = part
    await _load_suspensions(state, message, answered)
    for part in open_tool_parts(message):
        call_id = part["toolCallId"]
        name = tool_name_of(part) or ""
        tool = state.agent.tools.get(name)
        status = part.get("state")
        episode = latest_input(state.suspensions, call_id)
        if episode is not None:  # a declared suspension: its latest episode decides
            decided = await _resume_input(state, step, part, tool, episode)
            if isinstance(decided, tuple):
                call, entry = decided
                approved.append(call_id)  # marked executing before it runs (at most once)
                resumed[call_id] = entry
                to_execute.append(call)
            elif decided is not None:
                chunks.append(decided)
            continue
        if status == "approval-requested":
            continue
        if status == "approval-responded":
            answers.append(_approval_answer(part))
            if not part.get("approval", {}).get("approved"):
                chunks.append({"type": "tool-output-denied", "toolCallId": call_id})
            elif call_id in claim.executing_tool_calls or (
                tool is not None and tool.execute is None
            ):
                chunks.append(settle_chunk(call_id, "recovery"))
            elif tool is None:
                # Gone since it was approved (the agent changed, or its MCP server no longer
                # lists it): say so, not that a worker stopped.
                text = f"Tool {name} is no longer available; the approved call was not executed."
                chunks.append(error_chunk(call_id, text, "reject"))
            elif not await is_enabled(state, name):  # AD-055: checked again on resume
                chunks.append(error_chunk(call_id, f"Tool {name} is not available.", "reject"))
            else:
                entry = _resume_entry(state, call_id, name, "approval", part.get("approval"))
                pending = PendingCall(
                    tool_call_id=call_id,
                    tool=tool,
                    input=part.get("input"),
                    parsed=tool.parse_input(part.get("input")),
                )
                routed = await before_tool(state, step, pending, entry)
                if isinstance(routed, PendingCall):
                    approved.append(call_id)
                    resumed[call_id] = entry
                    to_execute.append(routed)
                else:
                    chunks.append(routed)
            continue
        if (
            tool is not None
            and tool.idempotent
            and tool.execute is not None
            and status == "input-available"
        ):
            to_execute.append(
                PendingCall(
                    tool_call_id=call_id,
                    tool=tool,
                    input=part.get("input"),
                    parsed=tool.parse_input(part.get("input")),
                )
            )
        else:
            chunks.append(settle_chunk(call_id, "recovery"))
    if not chunks and not to_execute:
        return None
    generation = Generation(claim, state.sink, message)
    await generation.start(step=None, continued=True)
    settled = [
        await after_tool(
            state,
            step,
            c,
            *inputs.get(str(c.get("toolCallId")), ("", None)),
            default_source="client",
            entry=_client_entry(state, answered.get(str(c.get("toolCallId"))), inputs),
        )
        for c in chunks
    ]
    await generation.emit({"type": "start", "messageId": generation.message_id}, *answers, *settled)
    if approved:
        await state.store.begin_actions(claim.lease, tool_call_ids=approved)
    executed = await run_tools(state, to_execute, generation, entries=resumed)
    # A resumed execute may suspend again: the call's next durable episode (LC-140).
    finals, suspended = split_suspended(executed, to_execute, state.suspensions)
    await generation.emit(
        *[
            # A call run because its suspension was answered is a resumed tool (source
            # "resume", entry "resume"); an idempotent re-run is an execution.
            await after_tool(
                state,
                step,
                c,
                call.tool.name,
                call.input,
                duration_ms=ms,
                default_source="resume" if call.tool_call_id in resumed else "execute",
                entry=resumed.get(call.tool_call_id),
            )
            for c, ms, call in finals
        ]
    )
    if suspended:
        await generation.emit({"type": "finish-step"})
        await state.store.suspend(
            claim.lease, message=generation.message, actions=suspended, usage=state.usage
        )
        waiting = RunOutcome(status="waiting", usage=state.usage)
        await finished(state, generation.message, waiting)
        return waiting
    await generation.emit({"type": "finish-step"}, {"type": "finish", "finishReason": "tool-calls"})
    state.history[:] = [m for m in state.history if m["id"] != message["id"]]
    state.history.append(generation.message)
    return await end_tool_results(
        state, generation, last_step=claim.step_count >= state.episode.max_steps
    )


async def _load_suspensions(
    state: RunState, message: UIMessage, answered: Mapping[str, Mapping[str, Any]]
) -> None:
    """LC-133: one read for the suspension episodes of the calls this episode resumes
    (answered approvals, client/manual results, answered input suspensions), and only when
    a tool hook reads them or a tool declares suspensions (whose answers are episodes)."""
    declares = any(t.resumes_with_answers for t in state.agent.tools.values())
    if not state.phases & TOOL_PHASES and not declares:
        return
    call_ids = [*answered] + [
        str(p["toolCallId"])
        for p in open_tool_parts(message)
        if p.get("state") == "approval-responded"
        or (declares and p.get("state") == "input-available")
    ]
    await preload_suspensions(state, call_ids)


def episode_calls(state: RunState, message: UIMessage) -> list[str]:
    """The waiting calls of ``message`` whose answers are episodes (tools that declare
    suspensions, sub-agents): their parts stay ``input-available`` when answered."""
    calls: list[str] = []
    for part in open_tool_parts(message):
        tool = state.agent.tools.get(tool_name_of(part) or "")
        if part.get("state") == "input-available" and tool and tool.resumes_with_answers:
            calls.append(str(part["toolCallId"]))
    return calls


async def preload_suspensions(state: RunState, call_ids: Sequence[str]) -> None:
    """Read the episodes of those ``call_ids`` not read yet in this episode (one read)."""
    missing = [c for c in call_ids if c not in state.suspensions_read]
    if not missing:
        return
    state.suspensions_read.update(missing)
    state.suspensions.update(await load_suspend_history(state.store, state.claim.lease, missing))


async def _resume_input(
    state: RunState,
    step: StepInfo,
    part: UIMessagePart,
    tool: Tool | None,
    episode: SuspensionEpisode,
) -> tuple[PendingCall, ResumeEntry] | UIMessageChunk | None:
    """A call whose latest episode is an input suspension: re-entered with its answer
    (after before_tool_call, LC-133), settled, or None while it still waits.

    ``executing`` means a worker died while the answered call ran: at most once, so a
    recovery error, unless the tool is idempotent (then it runs again with the same entry).
    """
    call_id, name = str(part["toolCallId"]), tool_name_of(part) or ""
    if episode.status == "pending":
        return None
    if episode.status == "cancelled":
        return settle_chunk(call_id, "cancel")
    if tool is None or tool.execute is None:
        return settle_chunk(call_id, "recovery")
    if episode.status == "executing" and not tool.idempotent:
        return settle_chunk(call_id, "recovery")
    if not await is_enabled(state, name):  # AD-055: checked again on resume
        return error_chunk(call_id, f"Tool {name} is not available.", "reject")
    entry = input_entry(tool.name, call_id, episode)
    pending = PendingCall(
        tool_call_id=call_id,
        tool=tool,
        input=part.get("input"),
        parsed=tool.parse_input(part.get("input")),
    )
    routed = await before_tool(state, step, pending, entry)
    return (routed, entry) if isinstance(routed, PendingCall) else routed


def _resume_entry(
    state: RunState, call_id: str, name: str, kind: Literal["approval", "client"], resume: Any
) -> ResumeEntry:
    """LC-133: the resume entry, referencing the call's latest pending action."""
    history = state.suspensions.get(call_id, ())
    action: dict[str, Any] = {"kind": kind, "toolCallId": call_id}
    if history:
        action["id"] = history[-1].action_id
    if kind == "approval":
        resume = dict(resume or {})
    return ResumeEntry(name=name, resume=resume, action=action, suspension=kind)


def _client_entry(
    state: RunState, part: Mapping[str, Any] | None, inputs: Mapping[str, tuple[str, Any]]
) -> ResumeEntry | None:
    """A submitted client/manual result resumes its suspended call (LC-133); ``resume`` is
    the submitted answer (from its episode, else read off the part)."""
    if part is None:
        return None
    call_id = str(part.get("toolCallId"))
    history = state.suspensions.get(call_id, ())
    resume: Any = history[-1].resolution if history else None
    if resume is None:
        resume = (
            {"errorText": part.get("errorText")}
            if part.get("state") == "output-error"
            else {"output": part.get("output")}
        )
    return _resume_entry(state, call_id, inputs[call_id][0], "client", resume)


def _client_result(
    part: Mapping[str, Any], tool: Any, source: Literal["client", "manual"]
) -> UIMessageChunk:
    call_id = str(part["toolCallId"])
    if part.get("state") == "output-error":
        return error_chunk(call_id, str(part.get("errorText", "")), source)
    try:
        output = tool.serialize_output(part.get("output"))  # LC-142
    except Exception as exc:
        return error_chunk(call_id, f"Invalid result for tool {tool.name}: {exc}"[:2000], source)
    return {
        "type": "tool-output-available",
        "toolCallId": call_id,
        "output": output,
        "toolMetadata": {"pai": {"source": source}},
    }


def _approval_answer(part: Mapping[str, Any]) -> UIMessageChunk:
    """The stored answer of an approval as its chunk: the continuation carries it, so a
    client that folds onto the message as it streamed (``approval-requested``) rebuilds the
    stored one without waiting for ``message.committed``."""
    approval = part.get("approval") or {}
    chunk: UIMessageChunk = {
        "type": "tool-approval-response",
        "approvalId": str(approval.get("id")),
        "approved": approval.get("approved") is True,
    }
    if isinstance(approval.get("reason"), str):
        chunk["reason"] = approval["reason"]
    return chunk


def _rejected(part: Mapping[str, Any], result: UIMessageChunk) -> bool:
    """Whether validation turned a submitted output into an error."""
    return part.get("state") == "output-available" and result["type"] == "tool-output-error"
