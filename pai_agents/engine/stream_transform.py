"""``transform_step_stream``: what it returns is what is published and stored (LC-107)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import cast

from pai_agents.engine.run_state import RunState
from pai_agents.engine.step_stream import StepTranslator
from pai_agents.ids import new_id
from pai_agents.lifecycle.inputs import StepInfo, TransformStepStreamInput
from pai_agents.lifecycle.request import ModelStepRequest
from pai_agents.lifecycle.streams import abort_step, canonical_step_stream
from pai_agents.lifecycle.ui_data import UiDataWriterImpl
from pai_agents.messages.types import UIMessageChunk
from pai_agents.models.base import StepStreamPart

__all__ = ["transformed_stream", "translate_part"]


async def transformed_stream(
    state: RunState,
    step: StepInfo,
    stream: AsyncIterator[StepStreamPart],
    request: ModelStepRequest,
    pending: list[UIMessageChunk],
) -> AsyncIterator[StepStreamPart]:
    """The stream the step consumes; ``ui_data`` writes land in ``pending``."""
    if "transform_step_stream" not in state.phases:
        return stream
    writer = UiDataWriterImpl(state.agent.ui_data_schemas, forward=pending.append)
    return await state.lifecycle.transform_step_stream(
        TransformStepStreamInput(
            **state.hook_base(),
            step=step,
            stream=canonical_step_stream(stream),  # LC-104: the canonical field names
            input=request,
            ui_data=writer,
            abort=abort_step,
        )
    )


def translate_part(translator: StepTranslator, part: StepStreamPart) -> list[UIMessageChunk]:
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
