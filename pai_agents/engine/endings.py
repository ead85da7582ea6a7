"""How a run's episode ends: completed, failed, cancelled mid-stream, or dropping a step.

Every ending commits first and publishes after: the run's status event follows the final
transaction, so a client that sees ``run.status`` can read the committed state.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pai_agents.engine.generation import (
    Generation,
    publish_finished,
    publish_generation_finished,
    publish_status,
)
from pai_agents.engine.run_state import RunState
from pai_agents.engine.runtime_errors import log_run_failure, report_runtime_error
from pai_agents.engine.step_stream import StepTranslator
from pai_agents.engine.store import RunOutcome, StepRecord
from pai_agents.engine.tool_calls import open_tool_parts, settle_chunk
from pai_agents.messages.types import UIMessage
from pai_agents.models.base import Usage, add_usage

__all__ = [
    "abandon_step",
    "commit_last_step",
    "end_dropping_open",
    "end_tool_results",
    "fail_run",
    "finish_run",
    "finished",
]


async def finished(state: RunState, message: UIMessage, outcome: RunOutcome) -> None:
    """The step that ended the run is committed: announce it and the run's status."""
    state.final_message = message
    await publish_finished(state.sink, state.claim, message, outcome)


async def commit_last_step(
    state: RunState,
    generation: Generation,
    record: StepRecord,
    outcome: RunOutcome,
    *,
    replace_open: bool,
) -> None:
    """Commit the step that ends the run, with the run's outcome, then announce both."""
    await state.store.commit_step(
        state.lease,
        message=generation.message,
        step=record,
        outcome=outcome,
        replace_open=replace_open,
    )
    await finished(state, generation.message, outcome)


async def end_tool_results(
    state: RunState, generation: Generation, *, last_step: bool
) -> RunOutcome | None:
    """A message's tool results are in: store it, ending the run when it was cancelled or
    ``last_step`` holds (the step budget is spent, or a hook completed it); otherwise the
    generation ends and the loop goes on. ``state.history`` is the caller's to update."""
    outcome: RunOutcome | None = None
    if state.signal.aborted:
        outcome = RunOutcome(status="cancelled", usage=state.usage)
    elif last_step:
        outcome = RunOutcome(status="completed", usage=state.usage)
    await state.store.update_message(state.lease, message=generation.message, outcome=outcome)
    if outcome is not None:
        await finished(state, generation.message, outcome)
    else:
        await publish_generation_finished(state.sink, state.claim, generation.message)
    return outcome


async def finish_run(state: RunState, outcome: RunOutcome) -> RunOutcome:
    """End the run with no step to commit."""
    await state.store.finish_run(state.lease, outcome)
    await publish_status(state.sink, state.claim, outcome)
    return outcome


async def fail_run(state: RunState, exc: BaseException) -> RunOutcome:
    """The run fails: the error stays private (on the run), clients see the status. A
    checkpointed step that could not be committed (its commit is what failed, say the
    database was away) is dropped with the run's end: no message stays open (LC-116)."""
    error = log_run_failure(state.lease.run_id, exc)
    outcome = RunOutcome(status="failed", error=error, usage=state.usage)
    await state.store.finish_run(state.lease, outcome, discard_open_step=state.open_step)
    await publish_status(state.sink, state.claim, outcome)
    await report_runtime_error(state.agent, state.claim, exc)
    return outcome


async def end_dropping_open(state: RunState, outcome: RunOutcome, index: int) -> RunOutcome:
    """End the run without committing step ``index``: its open row (a checkpoint, or a
    dead attempt's) is deleted in the ending transaction, so no refresh shows it and no
    message stays open after the run (LC-116)."""
    await state.store.finish_run(state.lease, outcome, discard_open_step=index)
    await publish_status(state.sink, state.claim, outcome)
    return outcome


async def abandon_step(
    state: RunState,
    generation: Generation,
    translator: StepTranslator,
    index: int,
    started_at: datetime,
    error: Exception | None = None,
    *,
    usage: Usage | None = None,
) -> RunOutcome:
    """A cancel (or, with ``error``, a failure) during the stream: commit the partial
    step, settled, and end the run cancelled (failed). ``usage``: what the step spent (an
    estimate when the provider reported none), else the translator's."""
    chunks = translator.close_open_parts()
    chunks += [settle_chunk(p["toolCallId"], "cancel") for p in open_tool_parts(generation.message)]
    spent = translator.usage if usage is None else usage
    state.usage = add_usage(state.usage, spent)
    if error is None:
        await generation.emit(*chunks, {"type": "abort", "reason": "cancelled"})
        outcome = RunOutcome(status="cancelled", usage=state.usage)
    else:
        private = log_run_failure(state.lease.run_id, error)
        # The detail stays private (on the run); the message only says the step failed.
        await generation.emit(*chunks, {"type": "error", "errorText": "The model step failed."})
        outcome = RunOutcome(status="failed", error=private, usage=state.usage)
    step = StepRecord(
        index=index,
        message_id=generation.message_id,
        request={"aborted": True} if error is None else {"failed": True},
        usage=spent,
        finish_reason="interrupted" if error is None else "error",
        started_at=started_at,
        finished_at=datetime.now(UTC),
    )
    await commit_last_step(state, generation, step, outcome, replace_open=generation.checkpointed)
    if error is not None:
        await report_runtime_error(state.agent, state.claim, error)
    return outcome
