"""run_finished for a run cancelled while no worker executed it (TH-041).

A queued or waiting run is cancelled by the operation itself (no episode runs), so the
engine's own ``run_finished`` call never happens for it. The operation hands this job to the
post-commit dispatcher instead: the observer runs after the cancel committed, outside any
lock, with status ``aborted``; a failure is reported through ``on_runtime_error``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from pai_agents.agent import AgentDefinition
from pai_agents.engine.rewrites import build_runtime_context, report_rewrite_error
from pai_agents.lifecycle.hooks import overridden_phases
from pai_agents.lifecycle.inputs import RunFinishedInput
from pai_agents.messages.types import UIMessage

__all__ = ["cancelled_run_finished", "observes_run_finished"]


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
