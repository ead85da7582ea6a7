"""``compose_lifecycle``: many lifecycle parts as one, with deterministic rules (LC-153..159).

* Non-around phases run parts left to right (LC-153).
* Value-transforming phases pass the transformed value on (LC-154): prepare_model_step the
  patched request, transform_step_stream the stream, before_tool_call the replaced input,
  after_tool_result the replaced result.
* prepare_run, after_step and prepare_history_rewrite give every part the same input and
  accumulate decisions (LC-155): patches merge by the model-configuration rules; in
  after_step a ``Complete`` from any part wins over ``NextStep``.
* The first prepare_run / prepare_model_step part returning respond, block, complete or
  fail ends the path, and the first before_tool_call part returning skip or reject decides
  the call; later parts are not called (LC-156, LC-157).
* around_model_call composes as wrappers, first part outermost (LC-090);
  resolve_model_context as middleware, first part outer, with memoized ``next()`` and
  leaf-replacing ``next(base)`` (LC-040..LC-042).
* Exceptions propagate unchanged (LC-158), annotated with the part's name (LC-005); the
  observers history_rewritten and run_finished call every part, then re-raise.

The composed lifecycle always returns normalized results (a phase's typed decision or
None), so the engine can call it without knowing how many parts there are.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from pai_agents._callables import call_user
from pai_agents.lifecycle.hooks import (
    PHASES,
    AgentLifecycle,
    ContextNext,
    LifecycleLike,
    ModelCallNext,
    as_lifecycle,
    lifecycle_name,
    overridden_phases,
)
from pai_agents.lifecycle.inputs import (
    AfterStepInput,
    AfterToolResultInput,
    BeforeToolCallInput,
    HistoryRewrittenInput,
    PrepareHistoryRewriteInput,
    PrepareModelStepInput,
    PrepareRunInput,
    ResolveModelContextInput,
    RunFinishedInput,
    StepStream,
    TransformStepStreamInput,
)
from pai_agents.lifecycle.patches import (
    ModelCallPatch,
    ModelStepPatch,
    RunPatch,
    apply_patch,
    coerce_patch,
    merge_patches,
)
from pai_agents.lifecycle.request import ModelStepRequest
from pai_agents.lifecycle.results import (
    AfterStepResult,
    AfterToolResultResult,
    BeforeToolCallResult,
    Block,
    Complete,
    Continue,
    Fail,
    HistoryRewritePatch,
    LifecycleResultError,
    NextStep,
    NextStepPatch,
    PrepareModelStepResult,
    PrepareRunResult,
    Reject,
    ReplaceInput,
    ReplaceMessage,
    ReplaceOutput,
    Respond,
    Skip,
    apply_tool_result,
)
from pai_agents.lifecycle.streams import ModelStepStreamResult, StepAborted
from pai_agents.models.base import ModelMessage

__all__ = ["ComposedLifecycle", "LifecycleTrace", "TraceEvent", "compose_lifecycle"]

_ALLOWED: Final[dict[str, tuple[type, ...]]] = {
    "prepare_run": (Continue, Respond, Complete, Fail),
    "prepare_model_step": (Continue, Respond, Block),
    "before_tool_call": (Continue, ReplaceInput, Skip, Reject),
    "after_tool_result": (Continue, ReplaceOutput, ReplaceMessage),
    "after_step": (NextStep, Complete),
    "prepare_history_rewrite": (HistoryRewritePatch,),
}


@dataclass(kw_only=True)
class TraceEvent:
    """One hook call: recorded when it starts; ``outcome`` set when it returns or raises."""

    part: str
    phase: str
    outcome: str = "running"


class LifecycleTrace:
    """Records ``(part, phase)`` calls of a composed lifecycle, in call order (diagnostics).

    Pass one to :func:`compose_lifecycle` in tests or when debugging; a trace shared by
    concurrent runs interleaves their calls, so production lifecycles normally have none.
    """

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    @property
    def calls(self) -> list[tuple[str, str]]:
        return [(e.part, e.phase) for e in self.events]

    def decisions(self, phase: str | None = None) -> list[tuple[str, str, str]]:
        return [
            (e.part, e.phase, e.outcome) for e in self.events if phase is None or e.phase == phase
        ]

    def clear(self) -> None:
        self.events.clear()


def _outcome(result: object) -> str:
    if result is None:
        return "none"
    if isinstance(result, ModelStepStreamResult | list | tuple) or hasattr(result, "__anext__"):
        return "value"
    return type(result).__name__


class ComposedLifecycle(AgentLifecycle):
    """The lifecycle :func:`compose_lifecycle` returns; ``parts`` are ``(name, part)``."""

    def __init__(
        self,
        parts: Sequence[tuple[str, AgentLifecycle]],
        *,
        name: str | None = None,
        trace: LifecycleTrace | None = None,
    ) -> None:
        self.name = name or "+".join(n for n, _ in parts) or "lifecycle"
        self.parts = tuple(parts)
        self.trace = trace
        self._by_phase = {
            phase: tuple((n, p) for n, p in parts if phase in overridden_phases(p))
            for phase in PHASES
        }
        self._phases = tuple(phase for phase, found in self._by_phase.items() if found)

    # -- calling one part --

    async def _call(self, name: str, phase: str, hook: Callable[..., Any], *args: Any) -> Any:
        event = TraceEvent(part=name, phase=phase)
        if self.trace is not None:
            self.trace.events.append(event)
        try:
            result = await call_user(hook, *args)
        except StepAborted:
            event.outcome = "abort"
            raise
        except Exception as exc:
            event.outcome = "error"
            exc.add_note(f"raised by lifecycle part {name!r} in {phase}")
            raise
        event.outcome = _outcome(result)
        allowed = _ALLOWED.get(phase)
        if allowed is not None and result is not None and not isinstance(result, allowed):
            names = ", ".join(t.__name__ for t in allowed)
            raise LifecycleResultError(
                f"lifecycle part {name!r} returned {result!r} from {phase}; expected {names}"
            )
        return result

    def _hooks(self, phase: str) -> tuple[tuple[str, AgentLifecycle], ...]:
        return self._by_phase[phase]

    # -- phases --

    async def prepare_run(self, input: PrepareRunInput) -> PrepareRunResult | None:
        patch: RunPatch | None = None
        for name, part in self._hooks("prepare_run"):
            result = await self._call(name, "prepare_run", part.prepare_run, input)
            if isinstance(result, Continue):
                if result.patch is not None:
                    patch = merge_patches(patch, coerce_patch(result.patch, RunPatch))
            elif result is not None:
                return cast(PrepareRunResult, result)
        return Continue(patch=patch) if patch is not None else None

    async def resolve_model_context(
        self, input: ResolveModelContextInput, next: ContextNext
    ) -> list[ModelMessage]:
        layers = self._hooks("resolve_model_context")

        async def run(index: int, leaf: ContextNext) -> list[ModelMessage]:
            if index == len(layers):
                return list(await leaf())
            name, part = layers[index]
            lock = asyncio.Lock()
            memo: list[list[ModelMessage]] = []

            async def downstream(base: Sequence[ModelMessage] | None = None) -> list[ModelMessage]:
                if base is not None:
                    fixed = list(base)

                    async def replaced_leaf() -> list[ModelMessage]:
                        return list(fixed)

                    return await run(index + 1, replaced_leaf)
                async with lock:  # next() runs the downstream chain once (LC-041)
                    if not memo:
                        memo.append(await run(index + 1, leaf))
                return list(memo[0])

            result = await self._call(
                name, "resolve_model_context", part.resolve_model_context, input, downstream
            )
            if result is None or isinstance(result, str | bytes):
                raise LifecycleResultError(
                    f"lifecycle part {name!r}: resolve_model_context must return messages"
                )
            return list(result)

        return await run(0, next)

    async def prepare_history_rewrite(
        self, input: PrepareHistoryRewriteInput
    ) -> HistoryRewritePatch | None:
        private: dict[str, Any] | None = None
        public: dict[str, Any] | None = None
        for name, part in self._hooks("prepare_history_rewrite"):
            result = await self._call(
                name, "prepare_history_rewrite", part.prepare_history_rewrite, input
            )
            if isinstance(result, HistoryRewritePatch):
                if result.private_metadata is not None:
                    private = {**(private or {}), **result.private_metadata}
                if result.metadata is not None:
                    public = {**(public or {}), **result.metadata}
        if private is None and public is None:
            return None
        return HistoryRewritePatch(private_metadata=private, metadata=public)

    async def history_rewritten(self, input: HistoryRewrittenInput) -> None:
        await self._observe("history_rewritten", input)

    async def prepare_model_step(
        self, input: PrepareModelStepInput
    ) -> PrepareModelStepResult | None:
        request = input.input
        patch: ModelStepPatch | None = None
        for name, part in self._hooks("prepare_model_step"):
            step_input = dataclasses.replace(input, input=request)
            result = await self._call(
                name, "prepare_model_step", part.prepare_model_step, step_input
            )
            if isinstance(result, Continue):
                if result.patch is not None:
                    step_patch = coerce_patch(result.patch, ModelStepPatch)
                    request = apply_patch(request, step_patch)
                    patch = merge_patches(patch, step_patch)
            elif result is not None:
                return cast(PrepareModelStepResult, result)
        return Continue(patch=patch) if patch is not None else None

    async def around_model_call(
        self, input: ModelStepRequest, next: ModelCallNext
    ) -> ModelStepStreamResult:
        layers = self._hooks("around_model_call")

        async def call_at(
            index: int, request: ModelStepRequest, patch: ModelCallPatch | None
        ) -> ModelStepStreamResult:
            if index == len(layers):
                return _stream_result(await (next() if patch is None else next(patch)))
            name, part = layers[index]

            async def downstream(value: object = None) -> ModelStepStreamResult:
                if value is None:
                    return await call_at(index + 1, request, patch)
                step = coerce_patch(value, ModelCallPatch)
                # Inner wrappers see the patched request (LC-090, LC-091); the outer ``next``
                # gets one patch equivalent to every layer's, applied in order.
                return await call_at(
                    index + 1, apply_patch(request, step), merge_patches(patch, step)
                )

            result = await self._call(
                name, "around_model_call", part.around_model_call, request, downstream
            )
            return _stream_result(result)

        return await call_at(0, input, None)

    async def transform_step_stream(self, input: TransformStepStreamInput) -> StepStream:
        stream = input.stream
        for name, part in self._hooks("transform_step_stream"):
            result = await self._call(
                name,
                "transform_step_stream",
                part.transform_step_stream,
                dataclasses.replace(input, stream=stream),
            )
            stream = _as_stream(result, name)
        return stream

    async def before_tool_call(self, input: BeforeToolCallInput) -> BeforeToolCallResult | None:
        current = input.input
        replaced = False
        for name, part in self._hooks("before_tool_call"):
            result = await self._call(
                name,
                "before_tool_call",
                part.before_tool_call,
                dataclasses.replace(input, input=current),
            )
            if isinstance(result, ReplaceInput):
                current, replaced = result.input, True
            elif isinstance(result, Skip | Reject):
                return result
            elif isinstance(result, Continue) and result.patch is not None:
                raise LifecycleResultError("before_tool_call Continue takes no patch")
        return ReplaceInput(current) if replaced else None

    async def after_tool_result(self, input: AfterToolResultInput) -> AfterToolResultResult | None:
        result = input.result
        last: ReplaceOutput | ReplaceMessage | None = None
        for name, part in self._hooks("after_tool_result"):
            decision = await self._call(
                name,
                "after_tool_result",
                part.after_tool_result,
                dataclasses.replace(input, result=result),
            )
            if isinstance(decision, ReplaceOutput | ReplaceMessage):
                result, last = apply_tool_result(result, decision), decision
            elif isinstance(decision, Continue) and decision.patch is not None:
                raise LifecycleResultError("after_tool_result Continue takes no patch")
        return last

    async def after_step(self, input: AfterStepInput) -> AfterStepResult | None:
        complete: Complete | None = None
        requested = False
        patches: list[NextStepPatch] = []
        for name, part in self._hooks("after_step"):
            result = await self._call(name, "after_step", part.after_step, input)
            if isinstance(result, Complete):
                complete = complete or result
            elif isinstance(result, NextStep):
                requested = True
                if result.patch is not None:
                    patches.append(result.patch)
        if complete is not None:
            return complete
        if requested:
            return NextStep(patch=combine_next_step_patches(patches))
        return None

    async def run_finished(self, input: RunFinishedInput) -> None:
        await self._observe("run_finished", input)

    async def _observe(self, phase: str, input: object) -> None:
        errors: list[Exception] = []
        for name, part in self._hooks(phase):
            try:
                await self._call(name, phase, getattr(part, phase), input)
            except Exception as exc:  # every observer runs; failures are reported after
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ExceptionGroup(f"{len(errors)} lifecycle {phase} observers failed", errors)


def combine_next_step_patches(patches: Sequence[NextStepPatch]) -> NextStepPatch | None:
    """One patch equivalent to applying ``patches`` to the overlay in order."""
    replacement: list[ModelMessage] | None = None
    appended: list[ModelMessage] = []
    for patch in patches:
        if patch.replace_model_messages is not None:
            replacement, appended = list(patch.replace_model_messages), []
        else:
            appended += list(patch.append_model_messages or ())
    if replacement is not None:
        return NextStepPatch(replace_model_messages=[*replacement, *appended])
    return NextStepPatch(append_model_messages=appended) if patches else None


def _stream_result(value: object) -> ModelStepStreamResult:
    if isinstance(value, ModelStepStreamResult):
        return value
    if hasattr(value, "__anext__"):
        return ModelStepStreamResult(stream=value)  # type: ignore[arg-type]
    raise LifecycleResultError(f"around_model_call must return a ModelStepStreamResult: {value!r}")


def _as_stream(value: object, name: str) -> StepStream:
    if hasattr(value, "__anext__"):
        return value  # type: ignore[return-value]
    if hasattr(value, "__aiter__"):
        return aiter(value)
    raise LifecycleResultError(
        f"lifecycle part {name!r}: transform_step_stream must return an async iterator"
    )


def compose_lifecycle(
    *parts: LifecycleLike | None, name: str | None = None, trace: LifecycleTrace | None = None
) -> ComposedLifecycle:
    """Compose lifecycle parts (AgentLifecycle objects, hook mappings or hook objects).

    ``None`` parts are skipped, so optional helpers compose naturally; composed parts are
    flattened, keeping their parts' names. Composition is deterministic (LC-159).
    """
    flat: list[tuple[str, AgentLifecycle]] = []
    for index, value in enumerate(parts):
        if value is None:
            continue
        part = as_lifecycle(value)
        if isinstance(part, ComposedLifecycle):
            flat.extend(part.parts)
        else:
            flat.append((lifecycle_name(part, f"part{index}"), part))
    return ComposedLifecycle(flat, name=name, trace=trace)
