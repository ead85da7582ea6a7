"""One model step: from the step's context to its committed assistant message.

Steered input joins first; then the context and the request are built, ``prepare_model_step``
may patch or answer, ``around_model_call`` wraps the provider call (reasoning pruned right
before each attempt), and the stream, through ``transform_step_stream``, is reduced into the
open message, published chunk by chunk and checkpointed every ``checkpoint_seconds``. A
transient provider fault retries the attempt (``model_retry.py``). A step without tool calls
ends the run (unless ``after_step`` asks for another); one with calls goes on in
``tool_step.py``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from pai_agents import tracing
from pai_agents.abort import Aborted
from pai_agents.engine.endings import (
    abandon_step,
    commit_last_step,
    end_dropping_open,
    finish_run,
)
from pai_agents.engine.events import message_committed
from pai_agents.engine.generation import Generation, end_chunks, publish_generation_finished
from pai_agents.engine.model_retry import is_retryable, wait_backoff
from pai_agents.engine.reasoning_summaries import ReasoningSummaries, attach_reasoning_summaries
from pai_agents.engine.run_state import RunState
from pai_agents.engine.runtime_errors import report_runtime_error
from pai_agents.engine.step_facts import StepFacts, StepReport, max_steps_reached
from pai_agents.engine.step_request import step_context, step_request
from pai_agents.engine.step_stream import CanonicalStepTranslator, StepTranslator
from pai_agents.engine.step_usage import spent_usage
from pai_agents.engine.store import LeaseLost, RunOutcome, StepRecord
from pai_agents.engine.stream_transform import transformed_stream, translate_part
from pai_agents.engine.synthetic import abort_by_policy, commit_response
from pai_agents.engine.tool_step import after_step, finish_tool_step
from pai_agents.ids import new_id
from pai_agents.lifecycle.inputs import PrepareModelStepInput, StepInfo
from pai_agents.lifecycle.model_call import ModelCallOutcome, open_model_stream, run_model_call
from pai_agents.lifecycle.output import StructuredOutputError, validate_output
from pai_agents.lifecycle.patches import ModelStepPatch, apply_patch, coerce_patch
from pai_agents.lifecycle.request import ModelStepRequest, to_model_request
from pai_agents.lifecycle.results import Block, Continue, NextStep, Respond
from pai_agents.lifecycle.streams import ModelStepStreamResult, StepAborted, aclose_stream
from pai_agents.messages.types import UIMessage, UIMessageChunk
from pai_agents.models.base import StepStreamPart, Usage, add_usage

__all__ = ["run_model_step"]

logger = logging.getLogger("pai.engine")


async def run_model_step(state: RunState, index: int, reuse_id: str | None) -> RunOutcome | None:
    """Step ``index``; ``reuse_id`` names a dead attempt's open message produced again.
    Returns the run's outcome when the step ended it."""
    with tracing.step_span(index):
        return await _model_step(state, index, reuse_id)


async def _model_step(state: RunState, index: int, reuse_id: str | None) -> RunOutcome | None:
    claim, lease = state.claim, state.lease
    started_at = datetime.now(UTC)
    step = StepInfo(step_id=new_id("stp"), index=index)
    if reuse_id is None:
        await _steer(state)  # (not before a repeated step: its open message predates it)
    messages = await step_context(state, step)
    request = await step_request(state, index, messages)
    step_retries: int | None = None  # the step patch's max_retries
    if "prepare_model_step" in state.phases:
        decision = await state.lifecycle.prepare_model_step(
            PrepareModelStepInput(**state.hook_base(), step=step, input=request)
        )
        if isinstance(decision, Continue) and decision.patch is not None:
            step_patch = coerce_patch(decision.patch, ModelStepPatch)
            request = apply_patch(request, step_patch)
            step_retries = step_patch.max_retries
        elif isinstance(decision, Respond):  # LC-080, LC-082
            return await commit_response(
                state,
                index,
                step,
                request,
                decision.response,
                decision.outcome,
                decision.reason,
                message_id=reuse_id,  # replaces a dead attempt's open message
                replace_open=reuse_id is not None,
            )
        elif isinstance(decision, Block):  # LC-081
            if decision.response is None:
                blocked = RunOutcome(
                    status="blocked", error={"reason": decision.reason}, usage=state.usage
                )
                if reuse_id is None:
                    return await finish_run(state, blocked)
                return await end_dropping_open(state, blocked, index)
            return await commit_response(
                state,
                index,
                step,
                request,
                decision.response,
                "blocked",
                decision.reason,
                message_id=reuse_id,
                replace_open=reuse_id is not None,
            )
    generation = Generation(
        claim, state.sink, {"id": reuse_id or new_id("msg"), "role": "assistant", "parts": []}
    )
    generation.checkpointed = reuse_id is not None
    attempt = _Attempt(translator=CanonicalStepTranslator(state.agent.tools))
    facts = StepFacts()
    spent: Usage = {}  # what retried attempts spent (estimated)
    restarted = reuse_id is not None
    policy = state.retry_policy(step_retries)
    while True:
        try:
            state.signal.raise_if_aborted()
            try:
                summary = await _attempt_step(
                    state, step, request, generation, attempt, facts, restarted=restarted
                )
                break
            except Exception as exc:
                if (
                    not is_retryable(exc)
                    or facts.retries >= policy.max_retries
                    or state.signal.aborted
                ):
                    raise
                await attempt.discard()
                spent = add_usage(spent, attempt.spent(generation))
                delay = policy.delay(facts.retries, exc)
                logger.warning(
                    "run %s step %d: %s; retry %d of %d in %.1f s",
                    claim.lease.run_id,
                    index,
                    exc,
                    facts.retries + 1,
                    policy.max_retries,
                    delay,
                    extra={"run_id": claim.lease.run_id},
                )
                await wait_backoff(state.signal, delay)
                facts.retries += 1
                facts.restart()
                if attempt.started:
                    # Deltas went out: clients reset the message (generation.started with
                    # restarted: true; SSE reset-step) and the retry streams it afresh.
                    generation = _fresh_generation(generation)
                    restarted = True
                attempt = _Attempt(translator=CanonicalStepTranslator(state.agent.tools))
        except StepAborted as aborted:
            await attempt.close_stream()
            return await abort_by_policy(state, aborted, index, generation, attempt.translator)
        except Aborted:
            # A cancel seen between parts leaves the model's stream suspended: close it
            # (and its provider connection) before writing the ending.
            await attempt.close_stream()
            usage = add_usage(spent, attempt.spent(generation))
            return await abandon_step(
                state, generation, attempt.translator, index, started_at, usage=usage
            )
        except LeaseLost:
            raise  # another worker owns the run: not a failure, and nothing to write
        except Exception as exc:
            await attempt.close_stream()
            usage = add_usage(spent, attempt.spent(generation))
            if not generation.checkpointed:
                # The run fails (LC-119, LC-158) through the episode, with what it spent.
                state.usage = add_usage(state.usage, usage)
                raise
            # The step's open checkpoint is stored: commit it settled, the run failed, so
            # that no message stays open once the run has ended.
            return await abandon_step(
                state, generation, attempt.translator, index, started_at, exc, usage=usage
            )
        finally:
            if attempt.summaries is not None:
                attempt.summaries.cancel()
    call, translator = attempt.call, attempt.translator
    assert call is not None
    step_usage = add_usage(spent, translator.usage)
    state.usage = add_usage(state.usage, step_usage)
    if facts.raw_finish_reason is not None:
        summary["rawFinishReason"] = facts.raw_finish_reason
    if facts.retries:
        summary["retries"] = facts.retries
    record = StepRecord(
        index=index,
        message_id=generation.message_id,
        request=summary,
        usage=step_usage,
        finish_reason=translator.finish_reason,
        started_at=started_at,
        finished_at=datetime.now(UTC),
    )
    report = StepReport(translator=translator, facts=facts, usage=step_usage, request=summary)
    if translator.tool_call_count:
        return await finish_tool_step(state, step, generation, report, record, call.request)
    await generation.emit(*end_chunks(translator.finish_reason))
    after = await after_step(state, step, generation.message, report, call.request)
    if isinstance(after, NextStep) and index + 1 >= state.episode.max_steps:
        record = max_steps_reached(record)  # another step was asked for: the budget ends it
    elif isinstance(after, NextStep):  # LC-145
        state.episode.overlay.apply(after.patch)  # LC-150
        await state.store.commit_step(
            lease, message=generation.message, step=record, replace_open=generation.checkpointed
        )
        state.history.append(generation.message)
        await publish_generation_finished(state.sink, claim, generation.message)
        return None
    done = RunOutcome(status="completed", usage=state.usage)
    invalid = _invalid_output(call.request, generation.message)  # TH-021
    if invalid is not None:
        error = {"type": type(invalid).__name__, "message": str(invalid)[:2000]}
        done = RunOutcome(status="failed", error=error, usage=state.usage)
    await commit_last_step(state, generation, record, done, replace_open=generation.checkpointed)
    if invalid is not None:
        await report_runtime_error(state.agent, claim, invalid)
    return done


class _Attempt:
    """One attempt at the provider call of a step (a retry makes a new one)."""

    def __init__(self, *, translator: StepTranslator) -> None:
        self.translator = translator
        self.call: ModelCallOutcome | None = None
        self.summaries: ReasoningSummaries | None = None
        self.started = False  # the generation was announced: clients may hold its deltas

    def spent(self, generation: Generation) -> Usage:
        """The attempt's reported usage, else an estimate of what it streamed."""
        messages = self.call.request.messages if self.call is not None else None
        return spent_usage(self.translator.usage, messages, generation.message)

    async def close_stream(self) -> None:
        """Close the attempt's model stream (a no-op once it ended or was closed)."""
        if self.call is not None:
            await _aclose(self.call.result.stream)

    async def discard(self) -> None:
        """A failed attempt is left behind: close its stream, stop its summaries."""
        await self.close_stream()
        if self.summaries is not None:
            self.summaries.cancel()
            self.summaries = None


def _fresh_generation(previous: Generation) -> Generation:
    """The same message produced again from nothing (its open checkpoint, if any, stays
    until the retry's first checkpoint or commit replaces it)."""
    generation = Generation(
        previous.claim,
        previous.sink,
        {"id": previous.message_id, "role": "assistant", "parts": []},
    )
    generation.checkpointed = previous.checkpointed
    return generation


async def _attempt_step(
    state: RunState,
    step: StepInfo,
    request: ModelStepRequest,
    generation: Generation,
    attempt: _Attempt,
    facts: StepFacts,
    *,
    restarted: bool,
) -> dict[str, Any]:
    """One provider call through ``around_model_call``, streamed into ``generation``."""

    async def provider(effective: ModelStepRequest) -> ModelStepStreamResult:
        model_request = to_model_request(effective, state.tool_specs)
        return await open_model_stream(effective.model, model_request, signal=effective.signal)

    model = request.model
    with tracing.model_call_span(provider=model.provider, model_id=model.model_id) as span:
        call = attempt.call = await run_model_call(state.lifecycle, request, provider)
        # around_model_call may have chosen another model
        span.set(gen_ai__request__model=call.request.model.model_id)
        # LC-128: a tool the effective request omitted cannot execute in this attempt.
        attempt.translator = CanonicalStepTranslator(
            {n: t for n, t in state.agent.tools.items() if call.may_execute(n)},
            provider_tools=call.request.provider_tools,  # LC-127: the attempt's own
        )
        attempt.summaries = attach_reasoning_summaries(state, generation, attempt.translator)
        attempt.started = True
        summary = await _consume(
            state, step, call, generation, attempt.translator, restarted, facts
        )
        span.usage(attempt.translator.usage, attempt.translator.finish_reason)
    if attempt.summaries is not None:
        await attempt.summaries.flush()  # AD-051: stored with the step, before its end
    return summary


async def _steer(state: RunState) -> None:
    """Input sent with the ``steer`` policy joins this run's context before a model step."""
    steered = await state.store.take_steering(state.lease)
    for message in steered:
        state.history.append(message)
        await state.sink.publish(message_committed(state.claim.thread_id, message))
    if steered:
        state.episode.overlay.discard()  # LC-146, LC-151: steering wins


async def _consume(
    state: RunState,
    step: StepInfo,
    call: ModelCallOutcome,
    generation: Generation,
    translator: StepTranslator,
    restarted: bool,
    facts: StepFacts,
) -> dict[str, Any]:
    """Stream the model into ``generation``; the step's request summary (for Step rows)."""
    request = call.request
    model = request.model
    summary: dict[str, Any] = {
        "provider": model.provider,
        "modelId": model.model_id,
        "messageCount": len(request.messages),
    }
    # Only what was given: every Step row stores this (W2 counts its WAL bytes).
    if request.model_settings:
        summary["settings"] = dict(request.model_settings)
    if request.tools:
        summary["tools"] = list(request.tools)
    if request.tool_choice is not None:
        summary["toolChoice"] = request.tool_choice
    if request.provider_tools:
        summary["providerTools"] = list(request.provider_tools)
    await generation.start(step=step.index, restarted=restarted)
    await generation.emit(
        {"type": "start", "messageId": generation.message_id}, {"type": "start-step"}
    )
    pending: list[UIMessageChunk] = []
    stream = await transformed_stream(state, step, call.result.stream, request, pending)
    send_reasoning = state.episode.send_reasoning
    t0 = last_checkpoint = time.perf_counter()
    async for part in stream:
        facts.observe(part)
        if pending:
            await generation.emit(*pending)
            pending.clear()
        hidden = not send_reasoning and state.hidden.take(part, generation.message)
        chunks = [] if hidden else translate_part(translator, part)  # TH-016
        if chunks:
            await generation.emit(*chunks)
        if state.signal.aborted:
            raise Aborted(state.signal.reason or "aborted")
        now = time.perf_counter()
        if now - last_checkpoint >= state.checkpoint_seconds:
            last_checkpoint = now
            await state.store.checkpoint_message(
                state.lease, message=generation.message, step_index=step.index
            )
            generation.checkpointed = True
            state.open_step = step.index
    if pending:
        await generation.emit(*pending)
    await generation.emit(*translator.close_open_parts())
    summary["durationMs"] = round((time.perf_counter() - t0) * 1000, 3)
    # The provider's response metadata; its model only where it differs from the request's.
    response = {
        k: v for k, v in translator.response.items() if k != "modelId" or v != model.model_id
    }
    if response:
        summary["response"] = response
    return summary


def _invalid_output(request: ModelStepRequest, message: UIMessage) -> StructuredOutputError | None:
    """TH-021: the error when a structured-output run's final text does not validate."""
    if request.output is None:
        return None
    try:
        validate_output(request.output, message)
    except StructuredOutputError as exc:
        logger.warning("run %s: %s", request.run_id, exc, extra={"run_id": request.run_id})
        return exc
    return None


async def _aclose(stream: AsyncIterator[StepStreamPart]) -> None:
    try:
        await aclose_stream(stream)
    except Exception:  # the upstream is being abandoned; its errors do not matter
        logger.debug("closing an aborted step stream failed", exc_info=True)
