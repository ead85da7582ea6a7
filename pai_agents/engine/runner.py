"""The run loop: one assistant message per model step, tools in between.

``run_episode`` drives a claimed run until it ends or waits: it resolves the model once,
settles what a previous episode left (approved or interrupted tool calls), then for each
step builds the request from the context-visible history, streams the model through the
chunk reducer (publishing every chunk), commits the step, executes the validated tool calls
and commits their results, and stops when a step calls no tool, a call needs a person or a
client, the run is cancelled, or ``max_steps`` is reached.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pai_agents.abort import Aborted, AbortSignal
from pai_agents.agent import AgentBehaviorInput, AgentDefinition, instructions_split
from pai_agents.engine.events import EventSink, NullSink
from pai_agents.engine.lease_keeper import LeaseKeeper
from pai_agents.engine.reasoning_summaries import attach_reasoning_summaries
from pai_agents.engine.step_stream import StepTranslator
from pai_agents.engine.store import (
    ClaimedRun,
    LeaseLost,
    RunOutcome,
    StepRecord,
    ThreadStore,
)
from pai_agents.engine.tool_calls import (
    execute_call,
    open_tool_parts,
    route_calls,
    settle_chunk,
    tool_name_of,
)
from pai_agents.engine.tool_data import tool_data_hub
from pai_agents.files import FileProvider, to_model_messages_with_files
from pai_agents.ids import new_id
from pai_agents.messages.model_messages import prune_reasoning
from pai_agents.messages.reducer import MessageReducer
from pai_agents.messages.types import UIMessage, UIMessageChunk
from pai_agents.models.base import (
    ModelMessage,
    ModelRequest,
    ModelSelection,
    Usage,
    add_usage,
    provider_tool_definitions,
)
from pai_agents.tools import ToolFailure

__all__ = ["RunEngine"]

logger = logging.getLogger("pai.engine")


class _Generation:
    """One assistant message being produced: folds chunks and publishes them, indexed."""

    __slots__ = ("checkpointed", "claim", "index", "message_id", "reducer", "sink", "tool_data")

    def __init__(self, claim: ClaimedRun, sink: EventSink, message: UIMessage) -> None:
        self.claim = claim
        self.sink = sink
        self.message_id = message["id"]
        self.reducer = MessageReducer(message)
        self.index = 0
        self.checkpointed = False
        self.tool_data: Any = None  # the running calls' ToolDataHub, made on first use

    @property
    def message(self) -> UIMessage:
        return self.reducer.message

    async def start(
        self, *, step: int | None, restarted: bool = False, continued: bool = False
    ) -> None:
        """Announce the generation. ``restarted``: a dead attempt's open message is being
        produced again (clients reset it); ``continued``: results join a committed message."""
        event: dict[str, Any] = {
            "type": "generation.started",
            "runId": self.claim.lease.run_id,
            "threadId": self.claim.thread_id,
            "messageId": self.message_id,
            "step": step,
        }
        if restarted:
            event["restarted"] = True
        if continued:
            event["continued"] = True
        await self.sink.publish(event)

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
class _Context:
    claim: ClaimedRun
    behavior: AgentBehaviorInput
    selection: ModelSelection
    history: list[UIMessage]
    signal: AbortSignal
    usage: Usage


@dataclass(kw_only=True)
class RunEngine:
    """Executes claimed runs of one agent against a store, publishing to a sink."""

    agent: AgentDefinition
    store: ThreadStore
    sink: EventSink = field(default_factory=NullSink)
    lease_seconds: float = 30.0
    # An open message is checkpointed at most this often while a step streams; a crash
    # then loses at most this much streamed output (the step itself is repeated).
    checkpoint_seconds: float = 2.0
    # Expands stored file references into model input before each call (MF-040); None
    # drops them, like any data part without a converter.
    files: FileProvider | None = None

    async def run_episode(
        self, claim: ClaimedRun, *, signal: AbortSignal | None = None
    ) -> RunOutcome:
        """Execute until the run ends or waits; raise LeaseLost if another worker took over."""
        signal = signal or AbortSignal()
        keeper = LeaseKeeper(
            self.store, claim.lease, lease_seconds=self.lease_seconds, signal=signal
        )
        hooked = None
        if self.agent.hooked:
            # Lifecycle agents (hooks or configured tools) take the hooked loop; others never
            # import it (no extra cost).
            from pai_agents.engine.hooks import LifecycleEpisode

            hooked = LifecycleEpisode(self, claim, signal)
        async with keeper:
            try:
                outcome = await (hooked.run() if hooked else self._episode(claim, signal))
            except LeaseLost:
                raise
            if keeper.lost:
                raise LeaseLost(claim.lease.run_id)
        if hooked is not None:
            await hooked.finished(outcome)  # run_finished: post-commit, outside the lease
        return outcome

    async def _episode(self, claim: ClaimedRun, signal: AbortSignal) -> RunOutcome:
        usage: Usage = dict(claim.usage)  # type: ignore[assignment]
        try:
            behavior = AgentBehaviorInput(
                identity=claim.identity,
                client_data=claim.client_data,
                runtime_context=None,
                thread_id=claim.thread_id,
                run_id=claim.lease.run_id,
                signal=signal,
            )
            runtime_context = await self.agent.build_runtime_context(behavior)
            behavior = AgentBehaviorInput(
                identity=claim.identity,
                client_data=claim.client_data,
                runtime_context=runtime_context,
                thread_id=claim.thread_id,
                run_id=claim.lease.run_id,
                signal=signal,
            )
            selection = await self.agent.resolve_model(behavior)
            history = await self.store.load_context(claim.lease)
        except LeaseLost:
            raise
        except Exception as exc:
            return await self._fail(claim, exc, usage)
        ctx = _Context(
            claim=claim,
            behavior=behavior,
            selection=selection,
            history=history,
            signal=signal,
            usage=usage,
        )
        reuse_id: str | None = None
        if claim.last_message is not None:
            if claim.last_message_open:
                reuse_id = claim.last_message["id"]
            else:
                outcome = await self._settle(ctx, claim.last_message)
                if outcome is not None:
                    return outcome
        for index in range(claim.step_count, self.agent.max_steps):
            outcome = await self._step(ctx, index, reuse_id)
            reuse_id = None
            if outcome is not None:
                return outcome
        return await self._finish(claim, RunOutcome(status="completed", usage=ctx.usage))

    async def _step(self, ctx: _Context, index: int, reuse_id: str | None) -> RunOutcome | None:
        claim, lease = ctx.claim, ctx.claim.lease
        started_at = datetime.now(UTC)
        generation = _Generation(
            claim,
            self.sink,
            {"id": reuse_id or new_id("msg"), "role": "assistant", "parts": []},
        )
        generation.checkpointed = reuse_id is not None
        # LC-127: provider-executed calls are valid only for the agent's provider tools.
        translator = StepTranslator(self.agent.tools, provider_tools=self.agent.provider_tools)
        if reuse_id is None:
            await self._steer(ctx)
        summaries = attach_reasoning_summaries(self.agent, ctx, generation, translator)
        try:
            summary = await self._stream(
                ctx, index, generation, translator, restarted=bool(reuse_id)
            )
            if summaries is not None:
                await summaries.flush()  # AD-051: stored with the step, before its end
        except Aborted:
            return await self._abandon(ctx, generation, translator, index, started_at)
        except LeaseLost:
            # Another worker owns the run: not a failure of the run, and nothing to write.
            raise
        except Exception as exc:
            if generation.checkpointed:
                # The step's open checkpoint is stored: commit it settled, so that no
                # message stays open once the run has ended.
                return await self._abandon(ctx, generation, translator, index, started_at, exc)
            return await self._fail(claim, exc, ctx.usage)
        finally:
            if summaries is not None:
                summaries.cancel()
        ctx.usage = add_usage(ctx.usage, translator.usage)
        step = StepRecord(
            index=index,
            message_id=generation.message_id,
            request=summary,
            usage=translator.usage,
            finish_reason=translator.finish_reason,
            started_at=started_at,
            finished_at=datetime.now(UTC),
        )
        if translator.tool_call_count == 0:
            await generation.emit(*_end_chunks(translator.finish_reason))
            done = RunOutcome(status="completed", usage=ctx.usage)
            await self.store.commit_step(
                lease,
                message=generation.message,
                step=step,
                outcome=done,
                replace_open=generation.checkpointed,
            )
            await self._finished(claim, generation.message, done)
            return done

        server_calls, actions, approval_chunks = route_calls(translator.calls)
        await generation.emit(*approval_chunks)
        # At-most-once tools: the calls are durable before any of them runs.
        await self.store.commit_step(
            lease, message=generation.message, step=step, replace_open=generation.checkpointed
        )
        results = await self._run_tools(ctx, server_calls, generation)
        await generation.emit(*results)
        if actions:
            await generation.emit({"type": "finish-step"})
            await self.store.suspend(
                lease, message=generation.message, actions=actions, usage=ctx.usage
            )
            waiting = RunOutcome(status="waiting", usage=ctx.usage)
            await self._finished(claim, generation.message, waiting)
            return waiting
        await generation.emit(*_end_chunks("tool-calls"))
        outcome: RunOutcome | None = None
        if ctx.signal.aborted:
            outcome = RunOutcome(status="cancelled", usage=ctx.usage)
        elif index + 1 >= self.agent.max_steps:
            outcome = RunOutcome(status="completed", usage=ctx.usage)
        await self.store.update_message(lease, message=generation.message, outcome=outcome)
        ctx.history.append(generation.message)
        if outcome is not None:
            await self._finished(claim, generation.message, outcome)
            return outcome
        await self._generation_finished(claim, generation.message)
        return None

    async def _stream(
        self,
        ctx: _Context,
        index: int,
        generation: _Generation,
        translator: StepTranslator,
        *,
        restarted: bool,
    ) -> dict[str, Any]:
        ctx.signal.raise_if_aborted()
        # AD-024, AD-025: structured instructions lead the messages, in order, with their
        # message-local provider options.
        system, leading = instructions_split(await self.agent.resolve_instructions(ctx.behavior))
        tools = [t.spec() for t in self.agent.tools.values()]
        request = ModelRequest(
            messages=[*leading, *prune_reasoning(await self.model_context(ctx.claim, ctx.history))],
            system=system,
            tools=tools,
            settings=ctx.selection.settings,
            provider_options=ctx.selection.provider_options,
            provider_tools=provider_tool_definitions(self.agent.provider_tools),  # AD-071
        )
        model = ctx.selection.model
        summary: dict[str, Any] = {
            "provider": model.provider,
            "modelId": model.model_id,
            "settings": dict(ctx.selection.settings),
            "tools": [t["name"] for t in tools],
            "messageCount": len(request.messages),
        }
        if request.provider_tools:
            summary["providerTools"] = list(request.provider_tools)
        await generation.start(step=index, restarted=restarted)
        await generation.emit(
            {"type": "start", "messageId": generation.message_id}, {"type": "start-step"}
        )
        t0 = last_checkpoint = time.perf_counter()
        async for part in model.stream(request, signal=ctx.signal):
            chunks = translator.translate(part)
            if chunks:
                await generation.emit(*chunks)
            if ctx.signal.aborted:
                raise Aborted(ctx.signal.reason or "aborted")
            now = time.perf_counter()
            if now - last_checkpoint >= self.checkpoint_seconds:
                last_checkpoint = now
                await self.store.checkpoint_message(
                    ctx.claim.lease, message=generation.message, step_index=index
                )
                generation.checkpointed = True
        await generation.emit(*translator.close_open_parts())
        summary["durationMs"] = round((time.perf_counter() - t0) * 1000, 3)
        if translator.response:
            summary["response"] = translator.response
        return summary

    async def model_context(
        self, claim: ClaimedRun, history: list[UIMessage]
    ) -> list[ModelMessage]:
        """The stored history as model messages, file references materialized in the run's
        partition; ``history`` itself is not changed (MF-031, MF-039)."""
        return await to_model_messages_with_files(
            history, self.files, scope_key=claim.scope_key, thread_id=claim.thread_id
        )

    async def _steer(self, ctx: _Context) -> None:
        """Input sent with the ``steer`` policy joins this run's context before a model step.

        (Not before a repeated step: its open message predates the input.)
        """
        steered = await self.store.take_steering(ctx.claim.lease)
        for message in steered:
            ctx.history.append(message)
            await self.sink.publish(
                {"type": "message.committed", "threadId": ctx.claim.thread_id, "message": message}
            )

    async def _run_tools(
        self, ctx: _Context, calls: list[Any], generation: _Generation | None = None
    ) -> list[UIMessageChunk]:
        """Execute calls concurrently; a cancel settles the ones still running. The calls'
        ToolData writes go to ``generation`` (TH-037)."""
        if not calls:
            return []
        call_ids = [c.tool_call_id if hasattr(c, "tool_call_id") else c[2] for c in calls]
        hub = None
        if generation is not None:
            hub = tool_data_hub(
                generation, self.store, ctx.claim.lease, interval=self.checkpoint_seconds
            )
        tasks = [
            asyncio.create_task(
                execute_call(
                    call,
                    run_id=ctx.claim.lease.run_id,
                    thread_id=ctx.claim.thread_id,
                    identity=ctx.claim.identity,
                    runtime_context=ctx.behavior.runtime_context,
                    history=ctx.history,
                    signal=ctx.signal,
                    data=hub.writer(call_id) if hub is not None else None,
                )
            )
            for call, call_id in zip(calls, call_ids, strict=True)
        ]
        aborted = asyncio.ensure_future(ctx.signal.wait())
        try:
            await asyncio.wait([*tasks, aborted], return_when=asyncio.FIRST_COMPLETED)
            while not aborted.done() and not all(t.done() for t in tasks):
                await asyncio.wait([*tasks, aborted], return_when=asyncio.FIRST_COMPLETED)
        finally:
            aborted.cancel()
        results: list[UIMessageChunk] = []
        for call, task in zip(calls, tasks, strict=True):
            if task.done() and not task.cancelled():
                results.append(_failed(task.result()))
            else:
                task.cancel()
                call_id = call.tool_call_id if hasattr(call, "tool_call_id") else call[2]
                results.append(settle_chunk(call_id, "cancel"))
        if hub is not None:
            await hub.release(call_ids)
        return results

    async def _settle(self, ctx: _Context, message: UIMessage) -> RunOutcome | None:
        """Finish what the previous episode left in the run's last message.

        Approved calls execute (marked as executing first: at most once), denied ones get
        ``output-denied``, calls a dead worker was executing become recovery errors (or run
        again when the tool is idempotent).
        """
        claim = ctx.claim
        to_execute: list[tuple[Any, Any, str]] = []
        chunks: list[UIMessageChunk] = []
        approved: list[str] = []
        for part in open_tool_parts(message):
            call_id = part["toolCallId"]
            tool = self.agent.tools.get(tool_name_of(part) or "")
            state = part.get("state")
            if state == "approval-requested":
                continue
            if state == "approval-responded":
                if not part.get("approval", {}).get("approved"):
                    chunks.append({"type": "tool-output-denied", "toolCallId": call_id})
                elif call_id in claim.executing_tool_calls or tool is None or tool.execute is None:
                    chunks.append(settle_chunk(call_id, "recovery"))
                else:
                    approved.append(call_id)
                    to_execute.append((tool, part.get("input"), call_id))
                continue
            if (
                tool is not None
                and tool.idempotent
                and tool.execute is not None
                and state == "input-available"
            ):
                to_execute.append((tool, part.get("input"), call_id))
            else:
                chunks.append(settle_chunk(call_id, "recovery"))
        if not chunks and not to_execute:
            return None
        generation = _Generation(claim, self.sink, message)
        await generation.start(step=None, continued=True)
        await generation.emit({"type": "start", "messageId": generation.message_id}, *chunks)
        if approved:
            await self.store.begin_actions(claim.lease, tool_call_ids=approved)
        await generation.emit(*await self._run_tools(ctx, to_execute, generation))
        await generation.emit(
            {"type": "finish-step"}, {"type": "finish", "finishReason": "tool-calls"}
        )
        outcome: RunOutcome | None = None
        if ctx.signal.aborted:
            outcome = RunOutcome(status="cancelled", usage=ctx.usage)
        elif claim.step_count >= self.agent.max_steps:
            outcome = RunOutcome(status="completed", usage=ctx.usage)
        await self.store.update_message(claim.lease, message=generation.message, outcome=outcome)
        ctx.history[:] = [m for m in ctx.history if m["id"] != message["id"]] + [generation.message]
        if outcome is not None:
            await self._finished(claim, generation.message, outcome)
            return outcome
        await self._generation_finished(claim, generation.message)
        return None

    async def _abandon(
        self,
        ctx: _Context,
        generation: _Generation,
        translator: StepTranslator,
        index: int,
        started_at: datetime,
        error: Exception | None = None,
    ) -> RunOutcome:
        """A cancel (or, with ``error``, a failure) during the stream: commit the partial
        step, settled, and end the run cancelled (failed)."""
        chunks = translator.close_open_parts()
        chunks += [
            settle_chunk(p["toolCallId"], "cancel") for p in open_tool_parts(generation.message)
        ]
        ctx.usage = add_usage(ctx.usage, translator.usage)
        if error is None:
            await generation.emit(*chunks, {"type": "abort", "reason": "cancelled"})
            outcome = RunOutcome(status="cancelled", usage=ctx.usage)
        else:
            logger.error(
                "run %s failed: %s",
                ctx.claim.lease.run_id,
                type(error).__name__,
                extra={"run_id": ctx.claim.lease.run_id},
                exc_info=error,
            )
            # The detail stays private (on the run); the message only says the step failed.
            await generation.emit(*chunks, {"type": "error", "errorText": "The model step failed."})
            outcome = RunOutcome(
                status="failed",
                error={"type": type(error).__name__, "message": str(error)[:2000]},
                usage=ctx.usage,
            )
        step = StepRecord(
            index=index,
            message_id=generation.message_id,
            request={"aborted": True} if error is None else {"failed": True},
            usage=translator.usage,
            finish_reason="interrupted" if error is None else "error",
            started_at=started_at,
            finished_at=datetime.now(UTC),
        )
        await self.store.commit_step(
            ctx.claim.lease,
            message=generation.message,
            step=step,
            outcome=outcome,
            replace_open=generation.checkpointed,
        )
        await self._finished(ctx.claim, generation.message, outcome)
        return outcome

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
        await self._status(claim, outcome)

    async def _status(self, claim: ClaimedRun, outcome: RunOutcome) -> None:
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
        await self._status(claim, outcome)
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
        outcome = await self._finish(claim, RunOutcome(status="failed", error=error, usage=usage))
        if self.agent.on_runtime_error is not None or self.agent.lifecycle is not None:
            from pai_agents.engine.hooks import report_runtime_error

            await report_runtime_error(self.agent, claim, exc)
        return outcome


def _failed(chunk: UIMessageChunk) -> UIMessageChunk:
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


def _end_chunks(finish_reason: str) -> list[UIMessageChunk]:
    reason = finish_reason if finish_reason in _FINISH_REASONS else "other"
    return [{"type": "finish-step"}, {"type": "finish", "finishReason": reason}]


_FINISH_REASONS = frozenset(
    {"stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"}
)
