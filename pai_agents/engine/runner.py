"""The run loop: one assistant message per model step, tools in between.

``run_episode`` drives a claimed run to its end: it resolves the model once, then for each
step builds the request from the context-visible history, streams the model through the
chunk reducer (publishing every chunk), commits the step, executes the validated tool calls
and commits their results, and stops when a step calls no tool or at ``max_steps``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pai_agents.abort import Aborted, AbortSignal
from pai_agents.agent import AgentBehaviorInput, AgentDefinition
from pai_agents.engine.events import EventSink, NullSink
from pai_agents.engine.step_stream import PendingCall, StepTranslator
from pai_agents.engine.store import ClaimedRun, RunOutcome, StepRecord, ThreadStore
from pai_agents.ids import new_id
from pai_agents.messages.model_messages import prune_reasoning, to_model_messages
from pai_agents.messages.reducer import MessageReducer
from pai_agents.messages.types import UIMessage, UIMessageChunk
from pai_agents.models.base import ModelRequest, ModelSelection, Usage, add_usage
from pai_agents.tools import ToolContext, ToolError

__all__ = ["RunEngine"]

logger = logging.getLogger("pai.engine")


class _Generation:
    """One assistant message being produced: folds chunks and publishes them, indexed."""

    __slots__ = ("claim", "index", "message_id", "reducer", "sink")

    def __init__(self, claim: ClaimedRun, sink: EventSink, message: UIMessage) -> None:
        self.claim = claim
        self.sink = sink
        self.message_id = message["id"]
        self.reducer = MessageReducer(message)
        self.index = 0

    @property
    def message(self) -> UIMessage:
        return self.reducer.message

    async def emit(self, *chunks: UIMessageChunk) -> None:
        for chunk in chunks:
            self.reducer.apply(chunk)
            await self.sink.publish(
                {
                    "type": "generation.message.chunk",
                    "runId": self.claim.lease.run_id,
                    "threadId": self.claim.thread_id,
                    "messageId": self.message_id,
                    "index": self.index,
                    "chunk": chunk,
                }
            )
            self.index += 1


@dataclass(kw_only=True)
class _StepOutput:
    generation: _Generation
    translator: StepTranslator
    started_at: datetime
    request_summary: dict[str, Any]


@dataclass(kw_only=True)
class RunEngine:
    """Executes claimed runs of one agent against a store, publishing to a sink."""

    agent: AgentDefinition
    store: ThreadStore
    sink: EventSink = field(default_factory=NullSink)

    async def run_episode(
        self, claim: ClaimedRun, *, signal: AbortSignal | None = None
    ) -> RunOutcome:
        signal = signal or AbortSignal()
        lease = claim.lease
        usage: Usage = {}
        try:
            behavior = AgentBehaviorInput(
                identity=claim.identity,
                client_data=claim.client_data,
                runtime_context=None,
                thread_id=claim.thread_id,
                run_id=lease.run_id,
            )
            runtime_context = await self.agent.build_runtime_context(behavior)
            behavior = AgentBehaviorInput(
                identity=claim.identity,
                client_data=claim.client_data,
                runtime_context=runtime_context,
                thread_id=claim.thread_id,
                run_id=lease.run_id,
            )
            selection = await self.agent.resolve_model(behavior)
            history = await self.store.load_context(lease)
        except Exception as exc:
            return await self._fail(claim, exc, usage)

        for index in range(claim.step_count, self.agent.max_steps):
            try:
                output = await self._stream_step(claim, behavior, selection, history, index, signal)
            except Aborted:
                return await self._finish(claim, RunOutcome(status="cancelled", usage=usage))
            except Exception as exc:
                return await self._fail(claim, exc, usage)
            translator = output.translator
            usage = add_usage(usage, translator.usage)
            generation = output.generation
            step = StepRecord(
                index=index,
                message_id=generation.message_id,
                request=output.request_summary,
                usage=translator.usage,
                finish_reason=translator.finish_reason,
                started_at=output.started_at,
                finished_at=datetime.now(UTC),
            )
            if translator.tool_call_count == 0:
                await generation.emit(*_end_chunks(translator.finish_reason))
                done = RunOutcome(status="completed", usage=usage)
                await self.store.commit_step(
                    lease, message=generation.message, step=step, outcome=done
                )
                await self._finished(claim, generation.message, done)
                return done

            # At-most-once tools: the calls are durable before any of them runs.
            await self.store.commit_step(lease, message=generation.message, step=step)
            client_calls = [c for c in translator.calls if c.tool.execute is None]
            server_calls = [c for c in translator.calls if c.tool.execute is not None]
            results = await asyncio.gather(
                *(self._execute(claim, behavior, call, history, signal) for call in server_calls)
            )
            await generation.emit(*results)
            last_step = index + 1 >= self.agent.max_steps
            outcome: RunOutcome | None = None
            if client_calls:
                outcome = RunOutcome(status="waiting", usage=usage)
            elif last_step:
                outcome = RunOutcome(status="completed", usage=usage)
            if client_calls:
                await generation.emit({"type": "finish-step"})
            else:
                await generation.emit(*_end_chunks("tool-calls"))
            if results or outcome is not None:
                await self.store.update_message(lease, message=generation.message, outcome=outcome)
            history.append(generation.message)
            if outcome is not None:
                await self._finished(claim, generation.message, outcome)
                return outcome
            await self._generation_finished(claim, generation.message)
        raise AssertionError("unreachable: the loop returns on its last step")

    async def _stream_step(
        self,
        claim: ClaimedRun,
        behavior: AgentBehaviorInput,
        selection: ModelSelection,
        history: list[UIMessage],
        index: int,
        signal: AbortSignal,
    ) -> _StepOutput:
        started_at = datetime.now(UTC)
        instructions = await self.agent.resolve_instructions(behavior)
        tools = [t.spec() for t in self.agent.tools.values()]
        request = ModelRequest(
            messages=prune_reasoning(to_model_messages(history)),
            system=instructions,
            tools=tools,
            settings=selection.settings,
            provider_options=selection.provider_options,
        )
        model = selection.model
        summary: dict[str, Any] = {
            "provider": model.provider,
            "modelId": model.model_id,
            "settings": dict(selection.settings),
            "tools": [t["name"] for t in tools],
            "messageCount": len(request.messages),
        }
        message_id = new_id("msg")
        generation = _Generation(
            claim, self.sink, {"id": message_id, "role": "assistant", "parts": []}
        )
        translator = StepTranslator(self.agent.tools)
        await self.sink.publish(
            {
                "type": "generation.started",
                "runId": claim.lease.run_id,
                "threadId": claim.thread_id,
                "messageId": message_id,
                "step": index,
            }
        )
        await generation.emit({"type": "start", "messageId": message_id}, {"type": "start-step"})
        t0 = time.perf_counter()
        async for part in model.stream(request, signal=signal):
            chunks = translator.translate(part)
            if chunks:
                await generation.emit(*chunks)
        await generation.emit(*translator.close_open_parts())
        summary["durationMs"] = round((time.perf_counter() - t0) * 1000, 3)
        if translator.response:
            summary["response"] = translator.response
        return _StepOutput(
            generation=generation,
            translator=translator,
            started_at=started_at,
            request_summary=summary,
        )

    async def _execute(
        self,
        claim: ClaimedRun,
        behavior: AgentBehaviorInput,
        call: PendingCall,
        history: list[UIMessage],
        signal: AbortSignal,
    ) -> UIMessageChunk:
        context = ToolContext(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool.name,
            run_id=claim.lease.run_id,
            thread_id=claim.thread_id,
            identity=claim.identity,
            runtime_context=behavior.runtime_context,
            signal=signal,
            messages=list(history),  # type: ignore[arg-type]
        )
        try:
            output = await call.tool.arun(call.parsed, context)
        except ToolError as exc:
            return {
                "type": "tool-output-error",
                "toolCallId": call.tool_call_id,
                "errorText": str(exc),
            }
        except Exception as exc:
            logger.warning(
                "tool %s raised %s",
                call.tool.name,
                type(exc).__name__,
                extra={"run_id": claim.lease.run_id},
                exc_info=True,
            )
            # Unexpected exceptions may carry internals; only ToolError text is shown verbatim.
            return {
                "type": "tool-output-error",
                "toolCallId": call.tool_call_id,
                "errorText": f"Tool {call.tool.name} failed ({type(exc).__name__}).",
            }
        return {"type": "tool-output-available", "toolCallId": call.tool_call_id, "output": output}

    async def _generation_finished(self, claim: ClaimedRun, message: UIMessage) -> None:
        await self.sink.publish(
            {
                "type": "generation.finished",
                "runId": claim.lease.run_id,
                "threadId": claim.thread_id,
                "messageId": message["id"],
                "message": message,
            }
        )

    async def _finished(self, claim: ClaimedRun, message: UIMessage, outcome: RunOutcome) -> None:
        await self._generation_finished(claim, message)
        await self.sink.publish(
            {
                "type": "run.status",
                "runId": claim.lease.run_id,
                "threadId": claim.thread_id,
                "status": outcome.status,
            }
        )

    async def _finish(self, claim: ClaimedRun, outcome: RunOutcome) -> RunOutcome:
        await self.store.finish_run(claim.lease, outcome)
        await self.sink.publish(
            {
                "type": "run.status",
                "runId": claim.lease.run_id,
                "threadId": claim.thread_id,
                "status": outcome.status,
            }
        )
        return outcome

    async def _fail(self, claim: ClaimedRun, exc: BaseException, usage: Usage) -> RunOutcome:
        # The error detail is private: operators see it on the run, clients see the status.
        logger.error(
            "run %s failed: %s",
            claim.lease.run_id,
            type(exc).__name__,
            extra={"run_id": claim.lease.run_id},
            exc_info=exc,
        )
        error = {"type": type(exc).__name__, "message": str(exc)[:2000]}
        return await self._finish(claim, RunOutcome(status="failed", error=error, usage=usage))


def _end_chunks(finish_reason: str) -> list[UIMessageChunk]:
    reason = finish_reason if finish_reason in _FINISH_REASONS else "other"
    return [{"type": "finish-step"}, {"type": "finish", "finishReason": reason}]


_FINISH_REASONS = frozenset(
    {"stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"}
)
