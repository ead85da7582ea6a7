"""The run loop with lifecycle hooks (docs/lifecycle-integration.md).

:class:`RunEngine` hands an episode to :class:`LifecycleEpisode` only when the agent has a
lifecycle, so an agent without one runs exactly the hook-free loop of ``runner.py`` with no
extra work or store calls. This module reuses the runner's generation, tool execution,
abandon and finish helpers and adds, in order:

* ``prepare_run`` before the model resolver (continue / respond / complete / fail);
* per step: ``resolve_model_context`` (memoized middleware over the step-anchored history,
  the store's context as the leaf), the layered request (``EpisodeState.step_request``),
  ``prepare_model_step`` (continue / respond / block), ``around_model_call`` via
  :func:`~pai_agents.lifecycle.run_model_call` (reasoning pruned right before each provider
  attempt), ``transform_step_stream`` (the canonical stream, ``ui_data``, ``abort``);
* ``before_tool_call`` / ``after_tool_result`` for every final result the engine produces;
* ``after_step`` before the step's transition commits;
* ``run_finished`` after the final commit, outside the lease.

A hook that raises fails the run: the error is reported through ``on_runtime_error`` and
kept private on the run; clients see only the ``failed`` status (LC-158).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, runtime_checkable

from pai_agents._callables import call_user
from pai_agents.abort import Aborted, AbortSignal
from pai_agents.agent import AgentBehaviorInput, AgentDefinition, ToolConfig, ToolOutputInput
from pai_agents.engine.reasoning_summaries import ReasoningSummaries, attach_reasoning_summaries
from pai_agents.engine.step_stream import CanonicalStepTranslator, PendingCall, StepTranslator
from pai_agents.engine.store import (
    ClaimedRun,
    Lease,
    LeaseLost,
    RunOutcome,
    StepRecord,
)
from pai_agents.engine.suspensions import load_suspend_history
from pai_agents.engine.tool_calls import (
    error_chunk,
    open_tool_parts,
    route_calls,
    settle_chunk,
    tool_name_of,
)
from pai_agents.ids import new_id
from pai_agents.lifecycle.compose import compose_lifecycle
from pai_agents.lifecycle.facade import (
    LifecycleMessage,
    LifecycleThread,
    MessageVisibility,
    ResolverThread,
    RunMetadataClient,
)
from pai_agents.lifecycle.history import AnchoredHistory
from pai_agents.lifecycle.hooks import overridden_phases
from pai_agents.lifecycle.inputs import (
    AfterStepInfo,
    AfterStepInput,
    AfterToolResultInput,
    BeforeToolCallInput,
    ExecutionInfo,
    InitialEntry,
    LifecycleRun,
    PrepareModelStepInput,
    PrepareRunInput,
    ResolveModelContextInput,
    ResumeEntry,
    RunFinishedInput,
    StepInfo,
    StepToolCall,
    ToolCallInfo,
    ToolExecutionEntry,
    ToolInfo,
    TransformStepStreamInput,
)
from pai_agents.lifecycle.model_call import ModelCallOutcome, open_model_stream, run_model_call
from pai_agents.lifecycle.output import StructuredOutputError, validate_output
from pai_agents.lifecycle.overlay import EpisodeState
from pai_agents.lifecycle.patches import ModelStepPatch, apply_patch, coerce_patch
from pai_agents.lifecycle.reasoning import HiddenReasoning
from pai_agents.lifecycle.request import ModelStepRequest, to_model_request
from pai_agents.lifecycle.results import (
    AssistantResponse,
    Block,
    Complete,
    Continue,
    Fail,
    NextStep,
    Reject,
    ReplaceInput,
    Respond,
    Skip,
    ToolResult,
    ToolResultSource,
    apply_tool_result,
)
from pai_agents.lifecycle.streams import (
    ModelStepStreamResult,
    StepAborted,
    abort_step,
    canonical_step_stream,
    synthetic_step_stream,
)
from pai_agents.lifecycle.suspensions import SuspensionEpisode
from pai_agents.lifecycle.ui_data import UiDataWriterImpl
from pai_agents.messages.types import UIMessage, UIMessageChunk
from pai_agents.models.base import ModelMessage, ModelSelection, StepStreamPart, add_usage

if TYPE_CHECKING:
    from pai_agents.engine.runner import RunEngine, _Context, _Generation

__all__ = [
    "LifecycleEpisode",
    "LifecycleStore",
    "RuntimeErrorReport",
    "report_runtime_error",
]

logger = logging.getLogger("pai.engine")


# -- runtime error reporting ------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RuntimeErrorReport:
    """What ``on_runtime_error`` receives: the full error, for operators only.

    ``phase`` and ``part`` name the lifecycle hook that raised, when one did (parsed from
    the notes the composed lifecycle adds); clients never see any of this.
    """

    run_id: str
    thread_id: str
    agent_name: str
    error: BaseException
    phase: str | None = None
    part: str | None = None


def _hook_origin(exc: BaseException) -> tuple[str | None, str | None]:
    for note in getattr(exc, "__notes__", ()):
        if note.startswith("raised by lifecycle part "):
            # "raised by lifecycle part 'name' in phase"
            head, _, phase = note.rpartition(" in ")
            return phase, head[len("raised by lifecycle part ") :].strip("'")
    return None, None


async def report_runtime_error(
    agent: AgentDefinition, claim: ClaimedRun, exc: BaseException
) -> None:
    """Call the agent's ``on_runtime_error`` (and a lifecycle's); never raises."""
    reporters = [agent.on_runtime_error]
    if agent.lifecycle is not None:
        reporters += [getattr(p, "on_runtime_error", None) for _, p in agent.lifecycle.parts]
    reporters = [r for r in reporters if callable(r)]
    if not reporters:
        return
    phase, part = _hook_origin(exc)
    report = RuntimeErrorReport(
        run_id=claim.lease.run_id,
        thread_id=claim.thread_id,
        agent_name=agent.name,
        error=exc,
        phase=phase,
        part=part,
    )
    for reporter in reporters:
        try:
            await call_user(cast(Any, reporter), report)
        except Exception:  # a broken reporter must not mask the run's own failure
            logger.exception("on_runtime_error reporter failed for run %s", claim.lease.run_id)


# -- what the store offers hooks -------------------------------------------------------


@runtime_checkable
class LifecycleStore(Protocol):
    """Optional store capability: the lease-fenced facade of the claimed run's thread."""

    def lifecycle_thread(
        self, lease: Lease, *, resolver: bool = False, schemas: Any = None
    ) -> LifecycleThread:
        """The facade bound to the lease's thread and partition; nothing is read yet.

        ``schemas`` (:class:`~pai_agents.lifecycle.metadata.AgentMetadataSchemas`) type
        every thread and message metadata write: the merged object is validated whole."""
        ...

    def lifecycle_run_metadata(
        self, lease: Lease, *, schemas: Any = None
    ) -> tuple[RunMetadataClient, RunMetadataClient]:
        """``(run.private_metadata, run.metadata)`` for the leased run (typed by
        ``schemas.run``)."""
        ...


class _Unsupported:
    """Stands in for facade clients when the store has no lifecycle support."""

    def __init__(self, what: str) -> None:
        self._what = what

    def __getattr__(self, name: str) -> Any:
        raise NotImplementedError(f"this store does not support lifecycle {self._what}.{name}")


# -- the episode ------------------------------------------------------------------------

_RESULT_TYPES = frozenset({"tool-output-available", "tool-output-error"})
_TOOL_PHASES = frozenset({"before_tool_call", "after_tool_result"})


@dataclass(frozen=True)
class _NoConfig:
    map_context: None = None


_NO_CONFIG: Any = _NoConfig()


class LifecycleEpisode:
    """One execution episode of a lifecycle agent (see the module docstring)."""

    def __init__(self, engine: RunEngine, claim: ClaimedRun, signal: AbortSignal) -> None:
        self.engine = engine
        self.agent = engine.agent
        self.lifecycle = engine.agent.lifecycle or compose_lifecycle()
        self.phases = frozenset(overridden_phases(self.lifecycle))
        self.store = engine.store
        self.claim = claim
        self.signal = signal
        self.final_message: UIMessage | None = None
        self.episode = EpisodeState.start(None, agent_max_steps=self.agent.max_steps)
        self._ctx: _Context | None = None
        self.runtime_context: Any = None
        self._tool_specs = {name: t.spec() for name, t in self.agent.tools.items()}
        # LC-121: the parsed input of each validated call, so nothing parses it again.
        self._parsed: dict[str, Any] = {}
        # LC-133: resumed calls' suspension episodes (loaded by _settle; empty otherwise).
        self._suspensions: dict[str, tuple[SuspensionEpisode, ...]] = {}
        self._hidden = HiddenReasoning()  # TH-016: reasoning kept from clients

    # -- entry points --

    async def run(self) -> RunOutcome:
        from pai_agents.engine.runner import _Context

        claim = self.claim
        usage = dict(claim.usage)
        try:
            behavior = AgentBehaviorInput(
                identity=claim.identity,
                client_data=claim.client_data,
                runtime_context=None,
                thread_id=claim.thread_id,
                run_id=claim.lease.run_id,
                signal=self.signal,  # AD-013, AD-016
            )
            runtime_context = await self.agent.build_runtime_context(behavior)
            self.behavior = dataclasses.replace(behavior, runtime_context=runtime_context)
            self._bind_facades(runtime_context)
            decision = None
            if "prepare_run" in self.phases:
                decision = await self.lifecycle.prepare_run(
                    PrepareRunInput(
                        **self._base(),
                        input=None,
                        latest_user_message=await self._latest_user_message(),
                    )
                )
            if isinstance(decision, Respond):
                return await self._respond_without_model(decision)
            if isinstance(decision, Complete):
                return await self._end_before_model(RunOutcome(status="completed", usage=usage))  # type: ignore[arg-type]
            if isinstance(decision, Fail):
                error = {"reason": decision.reason, "message": decision.message}
                return await self._end_before_model(
                    RunOutcome(status="failed", error=error, usage=usage)  # type: ignore[arg-type]
                )
            patch = decision.patch if isinstance(decision, Continue) else None
            self.episode = EpisodeState.start(
                cast(Any, patch), agent_max_steps=self.agent.max_steps
            )
            selection = await self._selection()
            history = await self.store.load_context(claim.lease)
        except LeaseLost:
            raise
        except Exception as exc:
            return await self.engine._fail(claim, exc, usage)  # type: ignore[arg-type]
        self._ctx = _Context(
            claim=claim,
            behavior=self.behavior,
            selection=selection,
            history=history,
            signal=self.signal,
            usage=usage,  # type: ignore[arg-type]
        )
        try:
            return await self._loop()
        except LeaseLost:
            self.episode.overlay.discard()  # LC-151
            raise
        except Exception as exc:
            return await self.engine._fail(claim, exc, self._ctx.usage)
        finally:
            self.episode.overlay.discard()

    async def finished(self, outcome: RunOutcome) -> None:
        """run_finished: after the final commit and outside the lease (TH-041, TH-042)."""
        if "run_finished" not in self.phases or outcome.status in ("waiting", "running"):
            return
        status: Literal["completed", "error", "aborted"] = (
            "error"
            if outcome.status == "failed"
            else "aborted"
            if outcome.status == "cancelled"
            else "completed"
        )
        try:
            await self.lifecycle.run_finished(
                RunFinishedInput(
                    run_id=self.claim.lease.run_id,
                    thread_id=self.claim.thread_id,
                    status=status,
                    run_status=cast(Any, outcome.status),
                    message=self.final_message,
                    continuation=self._operation() == "resume",
                    runtime_context=self.runtime_context,
                    error="The run failed." if outcome.status == "failed" else None,
                )
            )
        except Exception as exc:  # observers never change a committed run
            await report_runtime_error(self.agent, self.claim, exc)

    # -- setup helpers --

    def _operation(self) -> Literal["send", "trigger", "regenerate", "resume"]:
        if self.claim.step_count > 0 or self.claim.last_message is not None:
            return "resume"
        initiator = self.claim.initiator
        return cast(Any, initiator if initiator in ("send", "trigger", "regenerate") else "send")

    def _bind_facades(self, runtime_context: Any) -> None:
        lease = self.claim.lease
        if isinstance(self.store, LifecycleStore):
            schemas = self.agent.metadata_schemas
            self.thread: LifecycleThread = self.store.lifecycle_thread(lease, schemas=schemas)
            self.resolver_thread: ResolverThread = self.store.lifecycle_thread(
                lease, resolver=True, schemas=schemas
            )
            private, public = self.store.lifecycle_run_metadata(lease, schemas=schemas)
        else:
            self.thread = cast(LifecycleThread, _Unsupported("thread"))
            self.resolver_thread = cast(ResolverThread, self.thread)
            private = cast(RunMetadataClient, _Unsupported("run.private_metadata"))
            public = cast(RunMetadataClient, _Unsupported("run.metadata"))
        initiator = self.claim.initiator
        episode_start = datetime.now(UTC)
        # LC-007: the start the store recorded at the run's first claim, the same in every
        # episode. LC-008: the episode's own start; the first episode is the run's start.
        run_start = (self.claim.started_at or episode_start).astimezone(UTC)
        if self.claim.attempt <= 1:
            episode_start = run_start
        self.run_info = LifecycleRun(
            run_id=lease.run_id,
            thread_id=self.claim.thread_id,
            initiator=cast(
                Any, initiator if initiator in ("send", "trigger", "regenerate") else "send"
            ),
            started_at=run_start.isoformat(),
            execution=ExecutionInfo(
                operation=self._operation(), started_at=episode_start.isoformat()
            ),
            private_metadata=private,
            metadata=public,
        )
        self.runtime_context = runtime_context

    def _base(self) -> dict[str, Any]:
        return {
            "runtime_context": self.runtime_context,
            "run": self.run_info,
            "thread": self.thread,
            "signal": self.signal,
        }

    async def _latest_user_message(self) -> LifecycleMessage | None:
        """LC-069: the user message this operation appended (none on resume or trigger).

        The one input message, read only because prepare_run is defined; never a history
        page (LC-020)."""
        if self._operation() in ("resume", "trigger") or not isinstance(self.store, LifecycleStore):
            return None
        page = await self.thread.messages.list(view="all", order="desc", limit=1)
        if page.items and page.items[0].role == "user":
            return page.items[0]
        return None

    async def _selection(self) -> ModelSelection:
        patch = self.episode.run_patch
        if self.episode.needs_model_resolver or patch is None or patch.model is None:
            return await self.agent.resolve_model(self.behavior)  # AD-017
        return ModelSelection(model=patch.model)  # AD-018: the resolver is not called

    async def _end(self, outcome: RunOutcome) -> RunOutcome:
        return await self.engine._finish(self.claim, outcome)

    @property
    def ctx(self) -> _Context:
        assert self._ctx is not None
        return self._ctx

    # -- the loop --

    async def _loop(self) -> RunOutcome:
        claim = self.claim
        reuse_id: str | None = None
        if claim.last_message is not None:
            if claim.last_message_open:
                reuse_id = claim.last_message["id"]
            else:
                settled = await self._settle(claim.last_message)
                if settled is not None:
                    return settled
        for index in range(claim.step_count, self.episode.max_steps):  # LC-076
            outcome = await self._step(index, reuse_id)
            reuse_id = None
            if outcome is not None:
                return outcome
        return await self._end(RunOutcome(status="completed", usage=self.ctx.usage))

    async def _context(self, step: StepInfo) -> list[ModelMessage]:
        """The step's base context: the store's context, through resolve_model_context."""
        lease = self.claim.lease
        if "resolve_model_context" not in self.phases:
            history = await self.store.load_context(lease)
            self.ctx.history = history
            return await self.engine.model_context(self.claim, self._hidden.restore(history))
        anchored = await AnchoredHistory.anchor(self.resolver_thread.messages)  # LC-044
        through = anchored.through

        async def leaf() -> list[ModelMessage]:
            # LC-043 / LC-047: every context message up to the step's anchor, no later ones.
            history = await self.store.load_context(lease)
            if through is None:
                history = []
            else:
                ids = [m["id"] for m in history]
                if through.id in ids:
                    history = history[: ids.index(through.id) + 1]
            self.ctx.history = history
            return await self.engine.model_context(self.claim, self._hidden.restore(history))

        resolved = await self.lifecycle.resolve_model_context(
            ResolveModelContextInput(
                runtime_context=self.runtime_context,
                run=self.run_info,
                thread=self.resolver_thread,
                signal=self.signal,
                step=step,
                history=anchored,
            ),
            leaf,
        )
        return list(resolved)

    async def _step_request(self, index: int, messages: Sequence[ModelMessage]) -> ModelStepRequest:
        instructions = (
            await self.agent.resolve_instructions(self.behavior)
            if self.episode.needs_instructions
            else None
        )  # AD-026
        return self.episode.step_request(
            self.ctx.selection,
            instructions=instructions,
            resolved_context=messages,
            tools=await self._enabled_tools(),
            provider_tools=dict(self.agent.provider_tools),  # AD-071: declared, then patched
            run_id=self.claim.lease.run_id,
            thread_id=self.claim.thread_id,
            step_index=index,
            signal=self.signal,
            runtime_context=self.runtime_context,
        )

    async def _enabled_tools(self) -> list[str]:
        """AD-055, AD-056: registered tools whose ``enabled`` holds for this step."""
        return [name for name in self.agent.tools if await self._is_enabled(name)]

    async def _is_enabled(self, name: str) -> bool:
        config = self.agent.tool_configs.get(name)
        if config is None or config.enabled is True:
            return True
        if config.enabled is False:
            return False
        return bool(await call_user(config.enabled, self.behavior))

    async def _provider(self, attempt: ModelStepRequest) -> ModelStepStreamResult:
        return await open_model_stream(
            attempt.model, to_model_request(attempt, self._tool_specs), signal=attempt.signal
        )

    async def _step(self, index: int, reuse_id: str | None) -> RunOutcome | None:
        from pai_agents.engine.runner import _end_chunks, _Generation

        claim, lease = self.claim, self.claim.lease
        engine = self.engine
        started_at = datetime.now(UTC)
        step = StepInfo(step_id=new_id("stp"), index=index)
        if reuse_id is None:
            before = len(self.ctx.history)
            await engine._steer(self.ctx)  # steered input joins before the step
            if len(self.ctx.history) > before:
                self.episode.overlay.discard()  # LC-146, LC-151: steering wins
        messages = await self._context(step)
        request = await self._step_request(index, messages)
        if "prepare_model_step" in self.phases:
            decision = await self.lifecycle.prepare_model_step(
                PrepareModelStepInput(**self._base(), step=step, input=request)
            )
            if isinstance(decision, Continue) and decision.patch is not None:
                request = apply_patch(request, coerce_patch(decision.patch, ModelStepPatch))
            elif isinstance(decision, Respond):  # LC-080, LC-082
                return await self._synthetic(
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
                        status="blocked", error={"reason": decision.reason}, usage=self.ctx.usage
                    )
                    if reuse_id is None:
                        return await self._end(blocked)
                    return await self._end_dropping_open(blocked, index)
                return await self._synthetic(
                    index,
                    step,
                    request,
                    decision.response,
                    "blocked",
                    decision.reason,
                    message_id=reuse_id,
                    replace_open=reuse_id is not None,
                )
        generation = _Generation(
            claim,
            engine.sink,
            {"id": reuse_id or new_id("msg"), "role": "assistant", "parts": []},
        )
        generation.checkpointed = reuse_id is not None
        translator: StepTranslator = CanonicalStepTranslator(self.agent.tools)
        call: ModelCallOutcome | None = None
        summaries: ReasoningSummaries | None = None
        try:
            self.signal.raise_if_aborted()
            call = await run_model_call(self.lifecycle, request, self._provider)
            # LC-128: a tool the effective request omitted cannot execute in this attempt.
            translator = CanonicalStepTranslator(
                {n: t for n, t in self.agent.tools.items() if call.may_execute(n)},
                provider_tools=call.request.provider_tools,  # LC-127: the attempt's own
            )
            summaries = attach_reasoning_summaries(self.agent, self.ctx, generation, translator)
            summary = await self._consume(
                step, call, generation, translator, restarted=bool(reuse_id)
            )
            if summaries is not None:
                await summaries.flush()  # AD-051: stored with the step, before its end
        except StepAborted as aborted:
            if call is not None:
                await _aclose(call.result.stream)
            return await self._policy_abort(aborted, index, generation, translator, started_at)
        except Aborted:
            return await engine._abandon(self.ctx, generation, translator, index, started_at)
        except LeaseLost:
            raise
        except Exception as exc:
            if not generation.checkpointed:
                raise  # the run fails (LC-119, LC-158) through run()
            # As the runner does: the open checkpoint is committed settled, run failed.
            failed = await engine._abandon(self.ctx, generation, translator, index, started_at, exc)
            await report_runtime_error(self.agent, claim, exc)
            return failed
        finally:
            if summaries is not None:
                summaries.cancel()
        ctx = self.ctx
        ctx.usage = add_usage(ctx.usage, translator.usage)
        record = StepRecord(
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
            after = await self._after_step(step, generation.message, translator, call.request)
            if isinstance(after, NextStep) and index + 1 < self.episode.max_steps:  # LC-145
                self.episode.overlay.apply(after.patch)  # LC-150
                await self.store.commit_step(
                    lease,
                    message=generation.message,
                    step=record,
                    replace_open=generation.checkpointed,
                )
                ctx.history.append(generation.message)
                await engine._generation_finished(claim, generation.message)
                return None
            done = RunOutcome(status="completed", usage=ctx.usage)
            invalid = _invalid_output(call.request, generation.message)  # TH-021
            if invalid is not None:
                error = {"type": type(invalid).__name__, "message": str(invalid)[:2000]}
                done = RunOutcome(status="failed", error=error, usage=ctx.usage)
            await self.store.commit_step(
                lease,
                message=generation.message,
                step=record,
                outcome=done,
                replace_open=generation.checkpointed,
            )
            self.final_message = generation.message
            await engine._finished(claim, generation.message, done)
            if invalid is not None:
                await report_runtime_error(self.agent, claim, invalid)
            return done
        return await self._tool_step(step, generation, translator, record, call.request)

    async def _consume(
        self,
        step: StepInfo,
        call: ModelCallOutcome,
        generation: _Generation,
        translator: StepTranslator,
        *,
        restarted: bool,
    ) -> dict[str, Any]:
        request = call.request
        model = request.model
        summary: dict[str, Any] = {
            "provider": model.provider,
            "modelId": model.model_id,
            "settings": dict(request.model_settings),
            "tools": list(request.tools),
            "messageCount": len(request.messages),
        }
        if request.tool_choice is not None:
            summary["toolChoice"] = request.tool_choice
        if request.provider_tools:
            summary["providerTools"] = list(request.provider_tools)
        await generation.start(step=step.index, restarted=restarted)
        await generation.emit(
            {"type": "start", "messageId": generation.message_id}, {"type": "start-step"}
        )
        pending: list[UIMessageChunk] = []
        stream = await self._canonical(step, call.result.stream, request, pending)
        t0 = last_checkpoint = time.perf_counter()
        async for part in stream:
            if pending:
                await generation.emit(*pending)
                pending.clear()
            hidden = not self.episode.send_reasoning and self._hidden.take(part, generation.message)
            chunks = [] if hidden else _translate(translator, part)  # TH-016
            if chunks:
                await generation.emit(*chunks)
            if self.signal.aborted:
                raise Aborted(self.signal.reason or "aborted")
            now = time.perf_counter()
            if now - last_checkpoint >= self.engine.checkpoint_seconds:
                last_checkpoint = now
                await self.store.checkpoint_message(
                    self.claim.lease, message=generation.message, step_index=step.index
                )
                generation.checkpointed = True
        if pending:
            await generation.emit(*pending)
        await generation.emit(*translator.close_open_parts())
        summary["durationMs"] = round((time.perf_counter() - t0) * 1000, 3)
        if translator.response:
            summary["response"] = translator.response
        return summary

    async def _canonical(
        self,
        step: StepInfo,
        stream: AsyncIterator[StepStreamPart],
        request: ModelStepRequest,
        pending: list[UIMessageChunk],
    ) -> AsyncIterator[StepStreamPart]:
        """LC-107: what transform_step_stream returns is what is published and stored."""
        if "transform_step_stream" not in self.phases:
            return stream
        writer = UiDataWriterImpl(self.agent.ui_data_schemas, forward=pending.append)
        return await self.lifecycle.transform_step_stream(
            TransformStepStreamInput(
                **self._base(),
                step=step,
                stream=canonical_step_stream(stream),  # LC-104: the canonical field names
                input=request,
                ui_data=writer,
                abort=abort_step,
            )
        )

    # -- synthetic responses and aborts --

    async def _respond_without_model(self, decision: Respond) -> RunOutcome:
        """prepare_run respond (LC-070, LC-071, LC-111, AD-020)."""
        from pai_agents.engine.runner import _Context

        usage = dict(self.claim.usage)
        request: ModelStepRequest | None = None
        if "transform_step_stream" in self.phases:
            selection = await self.agent.resolve_model(self.behavior)
            self._ctx = _Context(
                claim=self.claim,
                behavior=self.behavior,
                selection=selection,
                history=[],
                signal=self.signal,
                usage=usage,  # type: ignore[arg-type]
            )
            request = await self._step_request(self.claim.step_count, ())
        else:
            self._ctx = _Context(
                claim=self.claim,
                behavior=self.behavior,
                selection=cast(Any, None),
                history=[],
                signal=self.signal,
                usage=usage,  # type: ignore[arg-type]
            )
        step = StepInfo(step_id=new_id("stp"), index=self.claim.step_count)
        reuse = self.claim.last_message if self.claim.last_message_open else None
        return await self._synthetic(
            self.claim.step_count,
            step,
            request,
            decision.response,
            decision.outcome,
            decision.reason,
            message_id=reuse["id"] if reuse else None,  # replaces a dead attempt's message
            replace_open=reuse is not None,
        )

    async def _synthetic(
        self,
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
        from pai_agents.engine.runner import _end_chunks, _Generation

        generation = _Generation(
            self.claim,
            self.engine.sink,
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
            start["messageMetadata"] = dict(response.metadata)
        await generation.emit(start, {"type": "start-step"})
        try:
            if transform and request is not None:
                stream = await self._canonical(step, stream, request, pending)  # LC-111
            async for part in stream:
                if pending:
                    await generation.emit(*pending)
                    pending.clear()
                await generation.emit(*_translate(translator, part))
        except StepAborted as aborted:
            return await self._policy_abort(aborted, index, generation, translator, started_at)
        if pending:
            await generation.emit(*pending)
        await generation.emit(*translator.close_open_parts(), *_end_chunks("stop"))
        outcome = RunOutcome(
            status=status,
            error=error or ({"reason": reason} if status != "completed" and reason else None),
            usage=self.ctx.usage,
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
        await self.store.commit_step(
            self.claim.lease,
            message=generation.message,
            step=record,
            outcome=outcome,
            replace_open=replace_open,
        )
        self.final_message = generation.message
        await self.engine._finished(self.claim, generation.message, outcome)
        return outcome

    async def _policy_abort(
        self,
        aborted: StepAborted,
        index: int,
        generation: _Generation,
        translator: StepTranslator,
        started_at: datetime,
    ) -> RunOutcome:
        """LC-116..LC-118, LC-120: drop the partial step; commit the replacement, if any."""
        self.ctx.usage = add_usage(self.ctx.usage, translator.usage)
        # Published chunks stay published; clients reconcile from the committed state.
        await generation.emit({"type": "abort", "reason": aborted.reason})
        error: dict[str, Any] = {"reason": aborted.reason}
        if aborted.message:
            error["message"] = aborted.message
        if aborted.replacement is not None:
            # The policy's own output, committed as given (not transformed again), under
            # the aborted step's message id so clients replace the partial message.
            return await self._synthetic(
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
        outcome = RunOutcome(status=aborted.outcome, error=error, usage=self.ctx.usage)
        if not generation.checkpointed:
            return await self._end(outcome)
        return await self._end_dropping_open(outcome, index)

    async def _end_before_model(self, outcome: RunOutcome) -> RunOutcome:
        """prepare_run ended the run: a dead attempt's open message goes with it."""
        if self.claim.last_message_open:
            return await self._end_dropping_open(outcome, self.claim.step_count)
        return await self._end(outcome)

    async def _end_dropping_open(self, outcome: RunOutcome, index: int) -> RunOutcome:
        """End the run without committing step ``index``: its open row (a checkpoint, or a
        dead attempt's) is deleted in the ending transaction, so no refresh shows it and no
        message stays open after the run (LC-116)."""
        await self.store.finish_run(self.claim.lease, outcome, discard_open_step=index)
        await self.engine._status(self.claim, outcome)
        return outcome

    # -- tools --

    def _tool_input(
        self, step: StepInfo, call_id: str, name: str, value: Any, entry: ToolExecutionEntry
    ) -> dict[str, Any]:
        tool = self.agent.tools.get(name)
        source: Literal["backend", "client"] = (
            "client" if tool is not None and tool.execute is None else "backend"
        )
        return {
            **self._base(),
            "step": step,
            "tool": ToolInfo(
                name=name, source=source, description=tool.description if tool else None
            ),
            "call": ToolCallInfo(tool_call_id=call_id),
            "input": value,
            "entry": entry,
            "suspend_history": self._suspensions.get(call_id, ()),
        }

    async def _before_tool(
        self, step: StepInfo, call: PendingCall, entry: ToolExecutionEntry | None = None
    ) -> PendingCall | UIMessageChunk:
        """LC-131..LC-136: the call to run (maybe with new input) or its final result."""
        if "before_tool_call" not in self.phases:
            return call
        decision = await self.lifecycle.before_tool_call(
            BeforeToolCallInput(
                **self._tool_input(
                    step, call.tool_call_id, call.tool.name, call.input, entry or InitialEntry()
                )
            )
        )
        if isinstance(decision, Skip):  # LC-135: validated against the output schema
            return {
                "type": "tool-output-available",
                "toolCallId": call.tool_call_id,
                "output": call.tool.serialize_output(decision.output),
                "toolMetadata": {"pai": {"source": "skip"}},
            }
        if isinstance(decision, Reject):  # LC-136
            return error_chunk(call.tool_call_id, decision.message, "reject")
        if isinstance(decision, ReplaceInput):  # LC-134
            parsed = call.tool.parse_input(decision.input)
            return PendingCall(
                tool_call_id=call.tool_call_id,
                tool=call.tool,
                input=parsed.model_dump(mode="json"),
                parsed=parsed,
            )
        return call

    async def _after_tool(
        self,
        step: StepInfo,
        chunk: UIMessageChunk,
        name: str,
        value: Any,
        *,
        default_source: ToolResultSource = "execute",
        entry: ToolExecutionEntry | None = None,
        duration_ms: float | None = None,
    ) -> UIMessageChunk:
        """after_tool_result, then the tool's ``on_output`` on a settled output (AD-064)."""
        final = await self._after_tool_result(
            step,
            chunk,
            name,
            value,
            default_source=default_source,
            entry=entry,
            duration_ms=duration_ms,
        )
        config = self.agent.tool_configs.get(name)
        if (
            config is not None
            and config.on_output is not None
            and final.get("type") == "tool-output-available"
        ):
            await self._on_output(config, final, name, value)
        return final

    async def _on_output(
        self, config: ToolConfig, chunk: UIMessageChunk, name: str, value: Any
    ) -> None:
        """AD-064..AD-069: typed, awaited before the model sees it; return value ignored."""
        tool = config.tool
        output = chunk.get("output")
        if tool.output_model is not None:
            output = tool.output_model.model_validate(output)
        await call_user(
            cast(Any, config.on_output),
            ToolOutputInput(
                identity=self.behavior.identity,
                client_data=self.behavior.client_data,
                runtime_context=self.runtime_context,
                thread_id=self.behavior.thread_id,
                run_id=self.behavior.run_id,
                signal=self.behavior.signal,
                input=self._parsed_input(str(chunk.get("toolCallId")), tool, value),
                output=output,
                tool_name=name,
                tool_call_id=str(chunk.get("toolCallId")),
            ),
        )

    def _parsed_input(self, call_id: str, tool: Any, value: Any) -> Any:
        """LC-121: the call's input as validated once; parsed only for calls never seen."""
        parsed = self._parsed.get(call_id)
        return tool.parse_input(value) if parsed is None else parsed

    async def _after_tool_result(
        self,
        step: StepInfo,
        chunk: UIMessageChunk,
        name: str,
        value: Any,
        *,
        default_source: ToolResultSource = "execute",
        entry: ToolExecutionEntry | None = None,
        duration_ms: float | None = None,
    ) -> UIMessageChunk:
        """LC-137..LC-141: every final result passes after_tool_result before the model."""
        if "after_tool_result" not in self.phases or chunk.get("type") not in _RESULT_TYPES:
            return chunk
        pai = (
            ((chunk.get("toolMetadata") or {}).get("pai") or {})
            if isinstance(chunk.get("toolMetadata"), Mapping)
            else {}
        )
        source = cast(ToolResultSource, pai.get("source") or default_source)
        if chunk["type"] == "tool-output-available":
            result = ToolResult(status="output-available", source=source, output=chunk["output"])
        else:
            result = ToolResult(
                status="output-error", source=source, message=str(chunk.get("errorText", ""))
            )
        decision = await self.lifecycle.after_tool_result(
            AfterToolResultInput(
                **self._tool_input(
                    step, str(chunk["toolCallId"]), name, value, entry or InitialEntry()
                ),
                result=result,
                duration_ms=duration_ms,
            )
        )
        if decision is None:
            return chunk
        final = apply_tool_result(result, decision)
        call_id = str(chunk["toolCallId"])
        if final.status == "output-available":
            tool = self.agent.tools.get(name)
            output = tool.serialize_output(final.output) if tool else final.output
            replaced: UIMessageChunk = {
                "type": "tool-output-available",
                "toolCallId": call_id,
                "output": output,
            }
            if source != "execute":
                replaced["toolMetadata"] = {"pai": {"source": source}}
            return replaced
        return error_chunk(call_id, final.message or "", cast(Any, source))

    async def _tool_step(
        self,
        step: StepInfo,
        generation: _Generation,
        translator: StepTranslator,
        record: StepRecord,
        request: ModelStepRequest,
    ) -> RunOutcome | None:
        from pai_agents.engine.runner import _end_chunks

        claim, lease, ctx, engine = self.claim, self.claim.lease, self.ctx, self.engine
        decided: list[tuple[UIMessageChunk, PendingCall]] = []
        calls: list[PendingCall] = []
        for pending_call in translator.calls:
            routed = await self._before_tool(step, pending_call)
            if isinstance(routed, PendingCall):
                self._parsed[routed.tool_call_id] = routed.parsed
                calls.append(routed)
            else:
                decided.append((routed, pending_call))
        server_calls, actions, approval_chunks = route_calls(calls)
        await generation.emit(*approval_chunks)
        await self.store.commit_step(
            lease, message=generation.message, step=record, replace_open=generation.checkpointed
        )
        raw = await self._run_timed(server_calls, generation)
        results = [
            await self._after_tool(step, chunk, c.tool.name, c.input) for chunk, c in decided
        ]
        results += [
            await self._after_tool(step, chunk, c.tool.name, c.input, duration_ms=ms)
            for (chunk, ms), c in zip(raw, server_calls, strict=True)
        ]
        await generation.emit(*results)
        after = await self._after_step(step, generation.message, translator, request)
        if actions and not isinstance(after, Complete):  # LC-146: waiting wins
            await generation.emit({"type": "finish-step"})
            await self.store.suspend(
                lease, message=generation.message, actions=actions, usage=ctx.usage
            )
            waiting = RunOutcome(status="waiting", usage=ctx.usage)
            self.final_message = generation.message
            await engine._finished(claim, generation.message, waiting)
            return waiting
        if actions:
            # LC-148: complete cancels the waiting calls in the completing transaction.
            cancelled = [
                await self._after_tool(
                    step, settle_chunk(a.tool_call_id, "cancel"), a.tool_name, a.input
                )
                for a in actions
            ]
            await generation.emit(*cancelled)
        await generation.emit(*_end_chunks("tool-calls"))
        outcome: RunOutcome | None = None
        if self.signal.aborted:
            outcome = RunOutcome(status="cancelled", usage=ctx.usage)
        elif isinstance(after, Complete) or step.index + 1 >= self.episode.max_steps:
            outcome = RunOutcome(status="completed", usage=ctx.usage)  # LC-147
        await self.store.update_message(lease, message=generation.message, outcome=outcome)
        ctx.history.append(generation.message)
        if outcome is not None:
            self.final_message = generation.message
            await engine._finished(claim, generation.message, outcome)
            return outcome
        if isinstance(after, NextStep):
            self.episode.overlay.apply(after.patch)
        await engine._generation_finished(claim, generation.message)
        return None

    async def _run_timed(
        self, calls: list[PendingCall], generation: Any = None
    ) -> list[tuple[UIMessageChunk, float]]:
        """The runner's tool execution, one call each, timed for after_tool_result; ToolData
        streams to ``generation`` live, before the result passes the hooks (TH-037)."""
        if not calls:
            return []
        mapped = any(
            self.agent.tool_configs.get(c.tool.name, _NO_CONFIG).map_context for c in calls
        )
        if "after_tool_result" not in self.phases and not mapped:
            return [(c, 0.0) for c in await self.engine._run_tools(self.ctx, calls, generation)]

        async def timed(call: PendingCall) -> tuple[UIMessageChunk, float]:
            ctx = self.ctx
            mapper = self.agent.tool_configs.get(call.tool.name, _NO_CONFIG).map_context
            if mapper is not None:  # AD-059: the tool's ctx.context is the mapped value
                context = await call_user(mapper, self.behavior)
                behavior = dataclasses.replace(ctx.behavior, runtime_context=context)
                ctx = dataclasses.replace(ctx, behavior=behavior)
            t0 = time.perf_counter()
            [chunk] = await self.engine._run_tools(ctx, [call], generation)
            return chunk, round((time.perf_counter() - t0) * 1000, 3)

        return list(await asyncio.gather(*(timed(c) for c in calls)))

    async def _after_step(
        self,
        step: StepInfo,
        message: UIMessage,
        translator: StepTranslator,
        request: ModelStepRequest,
    ) -> NextStep | Complete | None:
        """LC-143: after the message is assembled, before the transition commits."""
        if "after_step" not in self.phases:
            return None
        frozen = _frozen_message(message)  # LC-149: edits cannot reach the stored message
        calls = tuple(
            StepToolCall(
                tool_call_id=str(p.get("toolCallId")),
                tool_name=tool_name_of(p) or "",
                input=p.get("input"),
            )
            for p in message["parts"]
            if tool_name_of(p) is not None
        )
        result = await self.lifecycle.after_step(
            AfterStepInput(
                **self._base(),
                step=AfterStepInfo(
                    step_id=step.step_id,
                    index=step.index,
                    message=frozen,
                    finish_reason=translator.finish_reason,
                    tool_calls=calls,
                    provider_metadata=translator.response or None,
                    usage=translator.usage,
                ),
                request=request,
            )
        )
        return result if isinstance(result, NextStep | Complete) else None

    async def _settle(self, message: UIMessage) -> RunOutcome | None:
        """The runner's settle for a resumed episode, with the tool hooks (LC-133, LC-137)."""
        from pai_agents.engine.runner import _Generation

        claim, ctx, engine = self.claim, self.ctx, self.engine
        step = StepInfo(step_id=new_id("stp"), index=max(claim.step_count - 1, 0))
        chunks: list[UIMessageChunk] = []
        to_execute: list[PendingCall] = []
        approved: list[str] = []
        resumed: dict[str, ResumeEntry] = {}
        answered: dict[str, Mapping[str, Any]] = {}  # client/manual results, by call id
        inputs: dict[str, tuple[str, Any]] = {}
        for part in message["parts"]:
            name = tool_name_of(part)
            if name is None or part.get("providerExecuted") is True:
                continue  # a provider-executed result is the provider's, not a client's
            inputs[str(part.get("toolCallId"))] = (name, part.get("input"))
            pai = (part.get("toolMetadata") or {}).get("pai") or {}
            tool = self.agent.tools.get(name)
            if (
                tool is not None
                and tool.execute is None
                and not tool.needs_approval
                and part.get("state") in ("output-available", "output-error")
                and pai.get("source") in (None, "client", "manual")
                and not pai.get("settled")
            ):
                # A client-submitted or manually fulfilled result: validated (LC-142), then
                # after_tool_result with its source (LC-137, LC-138).
                chunks.append(self._client_result(part, tool, pai.get("source") or "client"))
                answered[str(part.get("toolCallId"))] = part
        await self._load_suspensions(message, answered)
        for part in open_tool_parts(message):
            call_id = part["toolCallId"]
            name = tool_name_of(part) or ""
            tool = self.agent.tools.get(name)
            state = part.get("state")
            if state == "approval-requested":
                continue
            if state == "approval-responded":
                if not part.get("approval", {}).get("approved"):
                    chunks.append({"type": "tool-output-denied", "toolCallId": call_id})
                elif call_id in claim.executing_tool_calls or tool is None or tool.execute is None:
                    chunks.append(settle_chunk(call_id, "recovery"))
                elif not await self._is_enabled(name):  # AD-055: checked again on resume
                    chunks.append(error_chunk(call_id, f"Tool {name} is not available.", "reject"))
                else:
                    entry = self._resume_entry(
                        call_id, name, "approval", dict(part.get("approval") or {})
                    )
                    pending = PendingCall(
                        tool_call_id=call_id,
                        tool=tool,
                        input=part.get("input"),
                        parsed=tool.parse_input(part.get("input")),
                    )
                    routed = await self._before_tool(step, pending, entry)
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
                and state == "input-available"
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
        generation = _Generation(claim, engine.sink, message)
        await generation.start(step=None, continued=True)
        settled = [
            await self._after_tool(
                step,
                c,
                *inputs.get(str(c.get("toolCallId")), ("", None)),
                default_source="client",
                entry=self._client_entry(answered.get(str(c.get("toolCallId"))), inputs),
            )
            for c in chunks
        ]
        await generation.emit({"type": "start", "messageId": generation.message_id}, *settled)
        if approved:
            await self.store.begin_actions(claim.lease, tool_call_ids=approved)
        executed = await self._run_timed(to_execute, generation)
        await generation.emit(
            *[
                # A call run because its suspension was answered is a resumed tool
                # (source "resume", entry "resume"); an idempotent re-run is an execution.
                await self._after_tool(
                    step,
                    c,
                    call.tool.name,
                    call.input,
                    duration_ms=ms,
                    default_source="resume" if call.tool_call_id in resumed else "execute",
                    entry=resumed.get(call.tool_call_id),
                )
                for (c, ms), call in zip(executed, to_execute, strict=True)
            ]
        )
        await generation.emit(
            {"type": "finish-step"}, {"type": "finish", "finishReason": "tool-calls"}
        )
        outcome: RunOutcome | None = None
        if self.signal.aborted:
            outcome = RunOutcome(status="cancelled", usage=ctx.usage)
        elif claim.step_count >= self.episode.max_steps:
            outcome = RunOutcome(status="completed", usage=ctx.usage)
        await self.store.update_message(claim.lease, message=generation.message, outcome=outcome)
        ctx.history[:] = [m for m in ctx.history if m["id"] != message["id"]] + [generation.message]
        if outcome is not None:
            self.final_message = generation.message
            await engine._finished(claim, generation.message, outcome)
            return outcome
        await engine._generation_finished(claim, generation.message)
        return None

    async def _load_suspensions(
        self, message: UIMessage, answered: Mapping[str, Mapping[str, Any]]
    ) -> None:
        """LC-133: one read for the suspension episodes of the calls this episode resumes
        (answered approvals, client/manual results), and only when a tool hook reads them."""
        if not self.phases & _TOOL_PHASES:
            return
        call_ids = [*answered] + [
            str(p["toolCallId"])
            for p in open_tool_parts(message)
            if p.get("state") == "approval-responded"
        ]
        self._suspensions = await load_suspend_history(self.store, self.claim.lease, call_ids)

    def _resume_entry(
        self, call_id: str, name: str, kind: Literal["approval", "client"], resume: Any
    ) -> ResumeEntry:
        """LC-133: the resume entry, referencing the call's latest pending action."""
        history = self._suspensions.get(call_id, ())
        action: dict[str, Any] = {"kind": kind, "toolCallId": call_id}
        if history:
            action["id"] = history[-1].action_id
        return ResumeEntry(name=name, resume=resume, action=action)

    def _client_entry(
        self, part: Mapping[str, Any] | None, inputs: Mapping[str, tuple[str, Any]]
    ) -> ResumeEntry | None:
        """A submitted client/manual result resumes its suspended call (LC-133); ``resume``
        is the submitted answer (from its episode, else read off the part)."""
        if part is None:
            return None
        call_id = str(part.get("toolCallId"))
        history = self._suspensions.get(call_id, ())
        resume: Any = history[-1].resolution if history else None
        if resume is None:
            resume = (
                {"errorText": part.get("errorText")}
                if part.get("state") == "output-error"
                else {"output": part.get("output")}
            )
        return self._resume_entry(call_id, inputs[call_id][0], "client", resume)

    def _client_result(
        self, part: Mapping[str, Any], tool: Any, source: Literal["client", "manual"] = "client"
    ) -> UIMessageChunk:
        call_id = str(part["toolCallId"])
        if part.get("state") == "output-error":
            chunk = error_chunk(call_id, str(part.get("errorText", "")), source)
        else:
            try:
                output = tool.serialize_output(part.get("output"))  # LC-142
            except Exception as exc:
                return error_chunk(
                    call_id, f"Invalid result for tool {tool.name}: {exc}"[:2000], source
                )
            chunk = {
                "type": "tool-output-available",
                "toolCallId": call_id,
                "output": output,
                "toolMetadata": {"pai": {"source": source}},
            }
        return chunk


# -- helpers ----------------------------------------------------------------------------


def _translate(translator: StepTranslator, part: StepStreamPart) -> list[UIMessageChunk]:
    """Translate one canonical part; synthetic native parts become their chunks."""
    if part.get("type") != "part":
        return translator.translate(part)
    native = dict(part.get("part") or {})
    kind = str(native.get("type", ""))
    if kind == "text":
        block = new_id("txt")
        return [
            {"type": "text-start", "id": block},
            {"type": "text-delta", "id": block, "delta": str(native.get("text", ""))},
            {"type": "text-end", "id": block},
        ]
    if kind.startswith("data-") or kind in ("source-url", "source-document", "file"):
        return [cast(UIMessageChunk, native)]
    return []


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


def _frozen_message(message: UIMessage) -> LifecycleMessage:
    import copy

    return LifecycleMessage(
        id=message["id"],
        role=message["role"],
        parts=tuple(copy.deepcopy(message["parts"])),
        metadata=copy.deepcopy(dict(message.get("metadata") or {})),
        visibility=MessageVisibility(),
    )


async def _aclose(stream: AsyncIterator[StepStreamPart]) -> None:
    close = getattr(stream, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:  # the upstream is being abandoned; its errors do not matter
            logger.debug("closing an aborted step stream failed", exc_info=True)
