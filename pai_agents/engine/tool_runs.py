"""Executing a step's server tool calls: concurrently, cancellable, each timed.

At-most-once: the caller has made the calls durable before any of them runs. A cancel
settles the calls still running (``source: "cancel"``); each call's ToolData writes stream
into the generation live (TH-037), before its result.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pai_agents._callables import call_user
from pai_agents.agent import AgentBehaviorInput
from pai_agents.capabilities import operation_capabilities
from pai_agents.engine.generation import Generation
from pai_agents.engine.run_state import RunState
from pai_agents.engine.step_stream import PendingCall
from pai_agents.engine.tool_calls import execute_call, settle_chunk
from pai_agents.engine.tool_data import tool_data_hub
from pai_agents.lifecycle.inputs import ResumeEntry
from pai_agents.messages.types import UIMessageChunk
from pai_agents.tools import ToolFailure

__all__ = ["run_tools"]


async def run_tools(
    state: RunState,
    calls: Sequence[PendingCall],
    generation: Generation,
    entries: Mapping[str, ResumeEntry] | None = None,
) -> list[tuple[UIMessageChunk, float]]:
    """Each call's result chunk and its duration in ms, in the order of ``calls``.

    ``entries``: the resume entry of each call re-entered after an answered suspension
    (its ``ctx.entry``; ``ctx.suspend_history`` is the run state's history of the call)."""
    if not calls:
        return []
    entries = entries or {}
    mapped = any(_mapper(state, c) is not None for c in calls)
    if "after_tool_result" not in state.phases and not mapped:
        # Nobody reads durations or mapped contexts: one batch, untimed.
        done = await _execute(state, calls, generation, state.behavior, entries)
        return [(c, 0.0) for c in done]

    async def timed(call: PendingCall) -> tuple[UIMessageChunk, float]:
        behavior = state.behavior
        mapper = _mapper(state, call)
        if mapper is not None:  # AD-059: the tool's ctx.context is the mapped value
            context = await call_user(mapper, behavior)
            behavior = dataclasses.replace(behavior, runtime_context=context)
        t0 = time.perf_counter()
        [chunk] = await _execute(state, [call], generation, behavior, entries)
        return chunk, round((time.perf_counter() - t0) * 1000, 3)

    return list(await asyncio.gather(*(timed(c) for c in calls)))


def _mapper(state: RunState, call: PendingCall) -> Any:
    config = state.agent.tool_configs.get(call.tool.name)
    return None if config is None else config.map_context


async def _execute(
    state: RunState,
    calls: Sequence[PendingCall],
    generation: Generation,
    behavior: AgentBehaviorInput,
    entries: Mapping[str, ResumeEntry],
) -> list[UIMessageChunk]:
    """Execute calls concurrently; a cancel settles the ones still running."""
    claim, signal = state.claim, state.signal
    call_ids = [c.tool_call_id for c in calls]
    hub = tool_data_hub(generation, state.store, claim.lease, interval=state.checkpoint_seconds)
    tasks = [
        asyncio.create_task(
            execute_call(
                call,
                run_id=claim.lease.run_id,
                thread_id=claim.thread_id,
                identity=claim.identity,
                runtime_context=behavior.runtime_context,
                history=state.history,
                signal=signal,
                data=hub.writer(call.tool_call_id),
                capabilities=operation_capabilities(call.tool.capabilities, state.capabilities),
                entry=entries.get(call.tool_call_id),
                suspend_history=state.suspensions.get(call.tool_call_id, ()),
            )
        )
        for call in calls
    ]
    aborted = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait([*tasks, aborted], return_when=asyncio.FIRST_COMPLETED)
        while not aborted.done() and not all(t.done() for t in tasks):
            await asyncio.wait([*tasks, aborted], return_when=asyncio.FIRST_COMPLETED)
    finally:
        aborted.cancel()
    results: list[UIMessageChunk] = []
    for call, task in zip(calls, tasks, strict=True):
        if task.done() and not task.cancelled():
            results.append(_returned_failure(task.result()))
        else:
            task.cancel()
            results.append(settle_chunk(call.tool_call_id, "cancel"))
    await hub.release(call_ids)
    return results


def _returned_failure(chunk: UIMessageChunk) -> UIMessageChunk:
    """A returned ``ctx.fail(...)`` becomes the call's error, source ``fail`` (LC-139)."""
    failure = chunk.get("output")
    if chunk.get("type") != "tool-output-available" or not isinstance(failure, ToolFailure):
        return chunk
    return {
        "type": "tool-output-error",
        "toolCallId": chunk["toolCallId"],
        "errorText": failure.message,
        "toolMetadata": {"pai": {"source": "fail"}},
    }
