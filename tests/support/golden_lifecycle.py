"""Lifecycles that override every phase (``PHASES``), for the golden scenarios and budgets.

:class:`EveryPhase` gives each phase an effect a recording shows: public thread and run
metadata from ``prepare_run``, a context note from ``resolve_model_context``, model settings
from ``prepare_model_step`` and ``around_model_call`` (the scripted model repeats them),
shouted text and a UI data part from ``transform_step_stream``, a changed tool input and
output, private run metadata from ``after_step``, public run metadata from ``run_finished``
(through the trusted facade, after the run), and thread metadata from
``prepare_history_rewrite`` on a regenerate. Public writes happen only where no text delta
is waiting to be published, so their events have a fixed place in the sequence.

:class:`Passthrough` overrides every phase and changes nothing: the cost of the hooked loop
itself (tests/integration/test_query_budget_lifecycle.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic import BaseModel

from pai_agents.lifecycle import (
    AfterStepInput,
    AfterToolResultInput,
    AgentLifecycle,
    BeforeToolCallInput,
    Continue,
    HistoryRewritePatch,
    HistoryRewrittenInput,
    ModelCallPatch,
    ModelStepPatch,
    PrepareHistoryRewriteInput,
    PrepareModelStepInput,
    PrepareRunInput,
    ReplaceInput,
    ReplaceOutput,
    ResolveModelContextInput,
    RunFinishedInput,
    RunPatch,
    TransformStepStreamInput,
)
from pai_agents.lifecycle.hooks import ContextNext, ModelCallNext
from pai_agents.lifecycle.request import ModelStepRequest
from pai_agents.lifecycle.streams import ModelStepStreamResult
from pai_agents.models.base import ModelMessage, StepStreamPart
from pai_threads import trusted_thread

__all__ = ["EveryPhase", "GoldenNote", "Passthrough"]


class GoldenNote(BaseModel):
    """The ``data-golden`` UI part ``transform_step_stream`` adds to each step."""

    step: int
    deltas: int


class EveryPhase(AgentLifecycle):
    """Every phase overridden, each with a visible, deterministic effect."""

    async def prepare_run(self, input: PrepareRunInput) -> Continue:
        runs = int((await input.thread.metadata.get()).get("runs", 0))
        await input.thread.metadata.merge({"runs": runs + 1})
        await input.run.metadata.merge({"operation": input.run.execution.operation})
        return Continue(patch=RunPatch(model_settings={"temperature": 0}))

    async def resolve_model_context(
        self, input: ResolveModelContextInput, next: ContextNext
    ) -> Sequence[ModelMessage]:
        note: ModelMessage = {"role": "system", "content": "Golden context note."}
        return [note, *(await next())]

    def prepare_model_step(self, input: PrepareModelStepInput) -> Continue:
        return Continue(patch=ModelStepPatch(model_settings={"topP": 0.5}))

    async def around_model_call(
        self, input: ModelStepRequest, next: ModelCallNext
    ) -> ModelStepStreamResult:
        return await next(ModelCallPatch(model_settings={"seed": 7}))

    def transform_step_stream(self, input: TransformStepStreamInput) -> AsyncIterator[Any]:
        async def shouted() -> AsyncIterator[StepStreamPart]:
            deltas = 0
            async for part in input.stream:
                if part["type"] == "text-delta":
                    deltas += 1
                    part = {**part, "delta": str(part["delta"]).upper()}
                yield part
            note = {"step": input.step.index, "deltas": deltas}
            input.ui_data.write({"type": "data-golden", "id": "note", "data": note})

        return shouted()

    def before_tool_call(self, input: BeforeToolCallInput) -> ReplaceInput:
        args = input.input.model_dump() if isinstance(input.input, BaseModel) else dict(input.input)
        return ReplaceInput({**args, "b": int(args["b"]) * 10})

    def after_tool_result(self, input: AfterToolResultInput) -> ReplaceOutput | None:
        output = input.result.output
        return ReplaceOutput(output + 1) if isinstance(output, int) else None

    async def after_step(self, input: AfterStepInput) -> None:
        await input.run.private_metadata.merge(
            {f"step{input.step.index}": input.step.finish_reason}
        )

    def run_finished(self, input: RunFinishedInput) -> None:
        run = trusted_thread(input.thread_id).runs.get(input.run_id)
        run.metadata.merge({"finished": input.run_status})

    def prepare_history_rewrite(self, input: PrepareHistoryRewriteInput) -> HistoryRewritePatch:
        rewrites = int(input.metadata.get("rewrites", 0))
        return HistoryRewritePatch(metadata={"rewrites": rewrites + 1})

    def history_rewritten(self, input: HistoryRewrittenInput) -> None:
        # Best effort and possibly coalesced: an effect here would have no fixed place.
        return None


class Passthrough(AgentLifecycle):
    """Every phase overridden; none changes anything."""

    def prepare_run(self, input: PrepareRunInput) -> None:
        return None

    async def resolve_model_context(
        self, input: ResolveModelContextInput, next: ContextNext
    ) -> Sequence[ModelMessage]:
        return await next()

    def prepare_model_step(self, input: PrepareModelStepInput) -> None:
        return None

    async def around_model_call(
        self, input: ModelStepRequest, next: ModelCallNext
    ) -> ModelStepStreamResult:
        return await next()

    def transform_step_stream(self, input: TransformStepStreamInput) -> Any:
        return input.stream

    def before_tool_call(self, input: BeforeToolCallInput) -> None:
        return None

    def after_tool_result(self, input: AfterToolResultInput) -> None:
        return None

    def after_step(self, input: AfterStepInput) -> None:
        return None

    def run_finished(self, input: RunFinishedInput) -> None:
        return None

    def prepare_history_rewrite(self, input: PrepareHistoryRewriteInput) -> None:
        return None

    def history_rewritten(self, input: HistoryRewrittenInput) -> None:
        return None
