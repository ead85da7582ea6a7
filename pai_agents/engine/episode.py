"""The episode loop: everything one claimed run does until it ends or waits.

In order: the runtime context is built; ``prepare_run`` may continue (with episode
defaults), respond, complete or fail; the model is resolved (unless prepare_run chose one,
AD-018) and the context loaded; what a previous episode left is resumed; then model steps
run until one ends the run or ``max_steps`` is reached. ``run_finished`` is called by
:func:`run_finished` after the final commit, outside the lease.

Every agent runs through this loop: a plain agent is a lifecycle agent with an empty
lifecycle, and each phase is called only when a part overrides it (``RunState.phases``).
A hook that raises fails the run: the error is reported through ``on_runtime_error`` and
kept private on the run; clients see only the ``failed`` status (LC-158).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from pai_agents import tracing
from pai_agents.capabilities import resolve_bindings
from pai_agents.engine.cancelled import settle_cancelled
from pai_agents.engine.endings import end_dropping_open, fail_run, finish_run
from pai_agents.engine.model_step import run_model_step
from pai_agents.engine.resume import episode_calls, preload_suspensions, resume_last_message
from pai_agents.engine.run_state import RunState
from pai_agents.engine.runtime_errors import report_runtime_error
from pai_agents.engine.store import LeaseLost, RunOutcome
from pai_agents.engine.synthetic import respond_without_model
from pai_agents.lifecycle.facade import LifecycleMessage
from pai_agents.lifecycle.inputs import PrepareRunInput, RunFinishedInput
from pai_agents.lifecycle.operation_input import OperationInput, resume_answers
from pai_agents.lifecycle.overlay import EpisodeState
from pai_agents.lifecycle.results import Complete, Continue, Fail, Respond
from pai_agents.models.base import ModelSelection

__all__ = ["run_episode_loop", "run_finished"]


async def run_episode_loop(state: RunState) -> RunOutcome:
    """Set the episode up and run its steps; LeaseLost propagates (nothing to write)."""
    claim = state.claim
    with tracing.run_span(
        run_id=claim.lease.run_id,
        thread_id=claim.thread_id,
        agent_name=claim.agent_name,
        attempt=claim.attempt,
    ) as span:
        outcome = await _episode(state)
        span.set(pai__run__status=outcome.status)
        span.usage(outcome.usage or {}, None)
        return outcome


async def _episode(state: RunState) -> RunOutcome:
    try:
        state.bind(await state.agent.build_runtime_context(state.behavior))
        if state.claim.cancel_requested and not state.claim.last_message_open:
            return await settle_cancelled(state)  # LC-137: cancelled while it waited
        if state.agent.capabilities:
            state.capabilities = await resolve_bindings(
                state.agent.capabilities, state.capability_bindings, state.behavior
            )
        decision = None
        if "prepare_run" in state.phases:
            latest = await _latest_user_message(state)
            decision = await state.lifecycle.prepare_run(
                PrepareRunInput(
                    **state.hook_base(),
                    input=await _operation_input(state, latest),
                    latest_user_message=latest,
                )
            )
        if isinstance(decision, Respond):
            return await respond_without_model(state, decision)
        if isinstance(decision, Complete):
            return await _end_before_model(state, RunOutcome(status="completed", usage=state.usage))
        if isinstance(decision, Fail):
            error = {"reason": decision.reason, "message": decision.message}
            return await _end_before_model(
                state, RunOutcome(status="failed", error=error, usage=state.usage)
            )
        patch = decision.patch if isinstance(decision, Continue) else None
        state.episode = EpisodeState.start(cast(Any, patch), agent_max_steps=state.agent.max_steps)
        state.selection = await _selection(state)
        state.history = await state.store.load_context(state.lease)
    except LeaseLost:
        raise
    except Exception as exc:
        return await fail_run(state, exc)
    try:
        return await _steps(state)
    except LeaseLost:
        raise
    except Exception as exc:
        return await fail_run(state, exc)
    finally:
        state.episode.overlay.discard()  # LC-151


async def run_finished(state: RunState, outcome: RunOutcome) -> None:
    """run_finished: after the final commit and outside the lease (TH-041, TH-042)."""
    if "run_finished" not in state.phases or outcome.status in ("waiting", "running"):
        return
    status: Literal["completed", "error", "aborted"] = (
        "error"
        if outcome.status == "failed"
        else "aborted"
        if outcome.status == "cancelled"
        else "completed"
    )
    try:
        await state.lifecycle.run_finished(
            RunFinishedInput(
                run_id=state.lease.run_id,
                thread_id=state.claim.thread_id,
                status=status,
                run_status=cast(Any, outcome.status),
                message=state.final_message,
                continuation=state.operation == "resume",
                runtime_context=state.runtime_context,
                error="The run failed." if outcome.status == "failed" else None,
            )
        )
    except Exception as exc:  # observers never change a committed run
        await report_runtime_error(state.agent, state.claim, exc)


async def _steps(state: RunState) -> RunOutcome:
    claim = state.claim
    reuse_id: str | None = None
    if claim.last_message is not None:
        if claim.last_message_open:
            reuse_id = claim.last_message["id"]
        else:
            resumed = await resume_last_message(state, claim.last_message)
            if resumed is not None:
                return resumed
    for index in range(claim.step_count, state.episode.max_steps):  # LC-076
        outcome = await run_model_step(state, index, reuse_id)
        reuse_id = None
        if outcome is not None:
            return outcome
    return await finish_run(state, RunOutcome(status="completed", usage=state.usage))


async def _latest_user_message(state: RunState) -> LifecycleMessage | None:
    """LC-069: the user message this operation appended (none on resume or trigger).

    The one input message, read only because prepare_run is defined; never a history page
    (LC-020)."""
    if state.operation in ("resume", "trigger"):
        return None
    try:
        messages = state.facades.thread.messages
    except NotImplementedError:
        return None  # the store has no lifecycle facade
    page = await messages.list(view="all", order="desc", limit=1)
    if page.items and page.items[0].role == "user":
        return page.items[0]
    return None


async def _operation_input(state: RunState, latest: LifecycleMessage | None) -> OperationInput:
    """LC-069: the input of the operation that created or resumed the run. On a resume of
    calls whose answers are episodes (declared suspensions, sub-agents), their episodes are
    read here, once: the resume reuses them (LC-133)."""
    operation = state.operation
    answers: tuple[Mapping[str, Any], ...] = ()
    if operation == "resume":
        tools = state.agent.tools
        client_tools = frozenset(n for n, t in tools.items() if t.execute is None)
        message = state.claim.last_message
        if message is not None:
            await preload_suspensions(state, episode_calls(state, message))
        answers = resume_answers(message, client_tools, state.suspensions)
    return OperationInput(
        operation=operation,
        client_data=dict(state.claim.client_data),
        message=latest if operation == "send" else None,
        answers=answers,
    )


async def _selection(state: RunState) -> ModelSelection:
    patch = state.episode.run_patch
    if state.episode.needs_model_resolver or patch is None or patch.model is None:
        return await state.agent.resolve_model(state.behavior)  # AD-017
    return ModelSelection(model=patch.model)  # AD-018: the resolver is not called


async def _end_before_model(state: RunState, outcome: RunOutcome) -> RunOutcome:
    """prepare_run ended the run: a dead attempt's open message goes with it."""
    if state.claim.last_message_open:
        return await end_dropping_open(state, outcome, state.claim.step_count)
    return await finish_run(state, outcome)
