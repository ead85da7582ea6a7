"""Steps no model produced: a hook's response, and a stream policy's abort.

``prepare_run`` and ``prepare_model_step`` may answer in the model's place (``Respond``,
``Block`` with a response); a ``transform_step_stream`` policy may abort the step, with or
without a replacement. Either way the response is streamed like a model's (through the
transform, unless it is the policy's own output) and committed as the step's message with
the run's outcome.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pai_agents.engine.endings import commit_last_step, end_dropping_open, finish_run
from pai_agents.engine.generation import Generation, end_chunks
from pai_agents.engine.run_state import RunState
from pai_agents.engine.step_request import step_request
from pai_agents.engine.step_stream import CanonicalStepTranslator, StepTranslator
from pai_agents.engine.store import RunOutcome, StepRecord
from pai_agents.engine.stream_transform import transformed_stream, translate_part
from pai_agents.ids import new_id
from pai_agents.lifecycle.inputs import StepInfo
from pai_agents.lifecycle.request import ModelStepRequest
from pai_agents.lifecycle.results import AssistantResponse, LifecycleResultError, Respond
from pai_agents.lifecycle.streams import StepAborted, synthetic_step_stream
from pai_agents.lifecycle.validation import validated_bag
from pai_agents.messages.types import UIMessageChunk
from pai_agents.models.base import add_usage

__all__ = ["abort_by_policy", "commit_response", "respond_without_model", "response_metadata"]


async def respond_without_model(state: RunState, decision: Respond) -> RunOutcome:
    """prepare_run respond (LC-070, LC-071, LC-111, AD-020)."""
    claim = state.claim
    request: ModelStepRequest | None = None
    if "transform_step_stream" in state.phases:
        state.selection = await state.agent.resolve_model(state.behavior)
        request = await step_request(state, claim.step_count, ())
    reuse = claim.last_message if claim.last_message_open else None
    return await commit_response(
        state,
        claim.step_count,
        StepInfo(step_id=new_id("stp"), index=claim.step_count),
        request,
        decision.response,
        decision.outcome,
        decision.reason,
        message_id=reuse["id"] if reuse else None,  # replaces a dead attempt's message
        replace_open=reuse is not None,
    )


async def commit_response(
    state: RunState,
    index: int,
    step: StepInfo,
    request: ModelStepRequest | None,
    response: AssistantResponse,
    status: Literal["completed", "blocked", "failed"],
    reason: str | None,
    *,
    transform: bool = True,
    message_id: str | None = None,
    replace_open: bool = False,
    error: Mapping[str, Any] | None = None,
) -> RunOutcome:
    """Commit a hook-authored response as the step's message, with the run outcome."""
    metadata = response_metadata(state, response)  # checked before anything streams
    generation = Generation(
        state.claim,
        state.sink,
        {"id": message_id or new_id("msg"), "role": "assistant", "parts": []},
    )
    generation.checkpointed = replace_open  # an abort drops that open row too
    translator: StepTranslator = CanonicalStepTranslator({})
    started_at = datetime.now(UTC)
    stream = synthetic_step_stream(response)
    pending: list[UIMessageChunk] = []
    await generation.start(step=index)
    start: UIMessageChunk = {"type": "start", "messageId": generation.message_id}
    if response.metadata:
        start["messageMetadata"] = metadata
    await generation.emit(start, {"type": "start-step"})
    try:
        if transform and request is not None:
            stream = await transformed_stream(state, step, stream, request, pending)  # LC-111
        async for part in stream:
            if pending:
                await generation.emit(*pending)
                pending.clear()
            await generation.emit(*translate_part(translator, part))
    except StepAborted as aborted:
        return await abort_by_policy(state, aborted, index, generation, translator)
    if pending:
        await generation.emit(*pending)
    await generation.emit(*translator.close_open_parts(), *end_chunks("stop"))
    outcome = RunOutcome(
        status=status,
        error=error or ({"reason": reason} if status != "completed" and reason else None),
        usage=state.usage,
    )
    record = StepRecord(
        index=index,
        message_id=generation.message_id,
        request={"synthetic": True},
        usage={},
        finish_reason="stop",
        started_at=started_at,
        finished_at=datetime.now(UTC),
    )
    await commit_last_step(state, generation, record, outcome, replace_open=replace_open)
    return outcome


def response_metadata(state: RunState, response: AssistantResponse) -> dict[str, Any]:
    """A hook response's public message metadata, checked like every other metadata write:
    ``pai`` is reserved (MF-008), the value is strict JSON and parsed by the agent's message
    metadata schema (MF-007, AD-033); what streams is what is stored (LC-108)."""
    if not response.metadata:
        return {}
    if "pai" in response.metadata:
        raise LifecycleResultError("AssistantResponse.metadata: metadata.pai is reserved (MF-008)")
    schema = state.agent.metadata_schemas.message
    checked = dict(
        validated_bag(
            schema.public if schema is not None else None,
            response.metadata,
            "AssistantResponse.metadata",
        )
    )
    if "pai" in checked:
        raise LifecycleResultError("AssistantResponse.metadata: metadata.pai is reserved (MF-008)")
    return checked


async def abort_by_policy(
    state: RunState,
    aborted: StepAborted,
    index: int,
    generation: Generation,
    translator: StepTranslator,
) -> RunOutcome:
    """LC-116..LC-118, LC-120: drop the partial step; commit the replacement, if any."""
    state.usage = add_usage(state.usage, translator.usage)
    # Published chunks stay published; clients reconcile from the committed state.
    await generation.emit({"type": "abort", "reason": aborted.reason})
    error: dict[str, Any] = {"reason": aborted.reason}
    if aborted.message:
        error["message"] = aborted.message
    if aborted.replacement is not None:
        # The policy's own output, committed as given (not transformed again), under the
        # aborted step's message id so clients replace the partial message.
        return await commit_response(
            state,
            index,
            StepInfo(step_id=new_id("stp"), index=index),
            None,
            aborted.replacement,
            aborted.outcome,
            aborted.reason,
            transform=False,
            message_id=generation.message_id,
            replace_open=generation.checkpointed,
            error=error,
        )
    outcome = RunOutcome(status=aborted.outcome, error=error, usage=state.usage)
    if not generation.checkpointed:
        return await finish_run(state, outcome)
    return await end_dropping_open(state, outcome, index)
