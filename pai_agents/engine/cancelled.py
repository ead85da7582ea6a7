"""Runs cancelled while no worker executed them (TH-041, LC-137).

A queued or waiting run is cancelled by the operation itself (no episode runs), so the
engine's own ``run_finished`` call never happens for it. The operation hands this job to the
post-commit dispatcher instead: the observer runs after the cancel committed, outside any
lock, with status ``aborted``; a failure is reported through ``on_runtime_error``.

A waiting run whose agent overrides ``after_tool_result`` is not settled by the operation:
every final result passes that hook before any model sees it (LC-137), and hooks run in an
episode (runtime context, facades, the lease). The operation marks the run cancel-requested
and queues it; :func:`settle_cancelled` is that short episode: each open call's
``cancel`` result passes the tool hooks once, streamed as a continuation of the waiting
message and stored with the ``cancelled`` ending in one write; the engine's own
``run_finished`` follows.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from pai_agents.agent import AgentDefinition
from pai_agents.engine.endings import end_tool_results, finish_run
from pai_agents.engine.generation import Generation
from pai_agents.engine.rewrites import build_runtime_context, report_rewrite_error
from pai_agents.engine.run_state import RunState
from pai_agents.engine.store import RunOutcome
from pai_agents.engine.tool_calls import open_tool_parts, settle_chunk, tool_name_of
from pai_agents.engine.tool_hooks import after_tool
from pai_agents.ids import new_id
from pai_agents.lifecycle.hooks import overridden_phases
from pai_agents.lifecycle.inputs import RunFinishedInput, StepInfo
from pai_agents.messages.types import UIMessage

__all__ = [
    "cancelled_run_finished",
    "observes_run_finished",
    "observes_tool_results",
    "settle_cancelled",
]


def observes_tool_results(agent: AgentDefinition) -> bool:
    """Whether the agent's lifecycle overrides after_tool_result (LC-137: then a cancelled
    waiting run's results pass it in an episode)."""
    lifecycle = agent.lifecycle
    return lifecycle is not None and "after_tool_result" in overridden_phases(lifecycle)


async def settle_cancelled(state: RunState) -> RunOutcome:
    """The episode of a run cancelled while it waited (LC-137): its open tool calls get
    their ``cancel`` results through after_tool_result, once each, then the run ends
    ``cancelled``. The caller has built the runtime context."""
    message = state.claim.last_message
    state.signal.abort("cancelled")  # the ending below is a cancel
    parts = list(open_tool_parts(message)) if message is not None else []
    if message is None or not parts:
        return await finish_run(state, RunOutcome(status="cancelled", usage=state.usage))
    step = StepInfo(step_id=new_id("stp"), index=max(state.claim.step_count - 1, 0))
    generation = Generation(state.claim, state.sink, message)
    await generation.start(step=None, continued=True)
    settled = [
        await after_tool(
            state,
            step,
            settle_chunk(part["toolCallId"], "cancel"),
            tool_name_of(part) or "",
            part.get("input"),
            default_source="cancel",
        )
        for part in parts
    ]
    await generation.emit({"type": "start", "messageId": generation.message_id}, *settled)
    await generation.emit({"type": "abort", "reason": "cancelled"})
    outcome = await end_tool_results(state, generation, last_step=False)
    assert outcome is not None  # the signal is aborted: the ending is a cancel
    return outcome


def observes_run_finished(agent: AgentDefinition) -> bool:
    """Whether the agent's lifecycle overrides run_finished (no job otherwise)."""
    lifecycle = agent.lifecycle
    return lifecycle is not None and "run_finished" in overridden_phases(lifecycle)


def cancelled_run_finished(
    agent: AgentDefinition,
    *,
    run_id: str,
    thread_id: str,
    identity: Mapping[str, Any],
    client_data: Mapping[str, Any],
    message: UIMessage | None,
    continuation: bool,
) -> Callable[[], Coroutine[Any, Any, None]]:
    """The post-commit job: ``run_finished`` with status ``aborted`` (run status
    ``cancelled``); ``continuation`` when the run had waited (it was resumable)."""

    async def job() -> None:
        lifecycle = agent.lifecycle
        if lifecycle is None:
            return
        try:
            runtime_context = await build_runtime_context(
                agent,
                identity=identity,
                client_data=client_data,
                thread_id=thread_id,
                run_id=run_id,
            )
            await lifecycle.run_finished(
                RunFinishedInput(
                    run_id=run_id,
                    thread_id=thread_id,
                    status="aborted",
                    run_status="cancelled",
                    message=message,
                    continuation=continuation,
                    runtime_context=runtime_context,
                )
            )
        except Exception as exc:  # observers never change a committed run
            await report_rewrite_error(
                agent, thread_id=thread_id, run_id=run_id, exc=exc, phase="run_finished"
            )

    return job
