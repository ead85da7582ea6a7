"""Typed hook results, one small frozen value per decision.

==================  ===========================================================
phase               results (returning None means "no change", LC-002)
==================  ===========================================================
prepare_run         Continue(patch: RunPatch) / Respond / Complete / Fail
prepare_model_step  Continue(patch: ModelStepPatch) / Respond / Block
before_tool_call    Continue / ReplaceInput / Skip(output) / Reject(message)
after_tool_result   Continue / ReplaceOutput / ReplaceMessage
after_step          NextStep(patch: NextStepPatch) / Complete
==================  ===========================================================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from pai_agents.lifecycle.patches import ModelStepPatch, RunPatch
from pai_agents.messages.types import UIMessagePart
from pai_agents.models.base import ModelMessage

__all__ = [
    "AfterStepResult",
    "AfterToolResultResult",
    "AssistantResponse",
    "BeforeToolCallResult",
    "Block",
    "Complete",
    "Continue",
    "Fail",
    "HistoryRewritePatch",
    "LifecycleResultError",
    "NextStep",
    "NextStepPatch",
    "PrepareModelStepResult",
    "PrepareRunResult",
    "Reject",
    "ReplaceInput",
    "ReplaceMessage",
    "ReplaceOutput",
    "Respond",
    "Skip",
    "ToolResult",
    "ToolResultSource",
    "ToolResultStatus",
    "apply_tool_result",
]


class LifecycleResultError(TypeError):
    """A hook returned a value that is not a valid decision for its phase."""


@dataclass(frozen=True, kw_only=True)
class AssistantResponse:
    """An assistant response authored by a hook: text, or native parts, plus public metadata.

    It is committed only after the canonical output policy (transform_step_stream) ran over
    it as a synthetic step stream (LC-111).
    """

    text: str | None = None
    parts: Sequence[UIMessagePart] = ()
    metadata: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.text is None and not self.parts:
            raise ValueError("an AssistantResponse needs text or parts")
        object.__setattr__(self, "parts", tuple(self.parts))


def _response(value: AssistantResponse | str) -> AssistantResponse:
    return AssistantResponse(text=value) if isinstance(value, str) else value


@dataclass(frozen=True, kw_only=True)
class Continue:
    """Go on unchanged, or (prepare_run / prepare_model_step) with a sparse patch."""

    patch: RunPatch | ModelStepPatch | None = None


@dataclass(frozen=True, kw_only=True)
class Respond:
    """Commit ``response`` as the assistant message and end the run without a model call."""

    response: AssistantResponse
    outcome: Literal["completed", "blocked"] = "completed"
    reason: str | None = None

    def __init__(
        self,
        response: AssistantResponse | str,
        *,
        outcome: Literal["completed", "blocked"] = "completed",
        reason: str | None = None,
    ) -> None:
        object.__setattr__(self, "response", _response(response))
        object.__setattr__(self, "outcome", outcome)
        object.__setattr__(self, "reason", reason)


@dataclass(frozen=True, kw_only=True)
class Complete:
    """prepare_run: complete without a message. after_step: complete even if tools ran."""

    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class Fail:
    """prepare_run: fail the run without pretending the agent answered (LC-073)."""

    reason: str
    message: str | None = None


@dataclass(frozen=True, kw_only=True)
class Block:
    """prepare_model_step: end the run blocked, committing ``response`` if given (LC-081)."""

    reason: str
    response: AssistantResponse | None = None

    def __init__(self, reason: str, *, response: AssistantResponse | str | None = None) -> None:
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "response", None if response is None else _response(response))


@dataclass(frozen=True)
class ReplaceInput:
    """before_tool_call: execute or route the call with ``input`` instead (LC-134)."""

    input: Any


@dataclass(frozen=True)
class Skip:
    """before_tool_call: do not execute; ``output`` is the (validated) result (LC-135)."""

    output: Any


@dataclass(frozen=True)
class Reject:
    """before_tool_call: do not execute; the model sees a tool error with ``message``."""

    message: str


@dataclass(frozen=True)
class ReplaceOutput:
    """after_tool_result: the model (and the stored part) get ``output`` (LC-141)."""

    output: Any


@dataclass(frozen=True)
class ReplaceMessage:
    """after_tool_result: the model-visible error or rejection text becomes ``message``."""

    message: str


@dataclass(frozen=True, kw_only=True)
class NextStepPatch:
    """Change the execution-local model-only overlay for later steps (LC-150)."""

    append_model_messages: Sequence[ModelMessage] | None = None
    replace_model_messages: Sequence[ModelMessage] | None = None

    def __post_init__(self) -> None:
        if (self.append_model_messages is None) == (self.replace_model_messages is None):
            raise ValueError("give exactly one of append_model_messages, replace_model_messages")
        for name in ("append_model_messages", "replace_model_messages"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(value))


@dataclass(frozen=True, kw_only=True)
class NextStep:
    """after_step: request another model step (waiting and steering still win, LC-146)."""

    patch: NextStepPatch | None = None


@dataclass(frozen=True, kw_only=True)
class HistoryRewritePatch:
    """prepare_history_rewrite: sparse thread-metadata patches committed with the rewrite."""

    private_metadata: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] | None = None


ToolResultStatus: TypeAlias = Literal["output-available", "output-error"]
ToolResultSource: TypeAlias = Literal[
    "execute", "skip", "reject", "throw", "fail", "client", "manual", "resume", "cancel",
    "recovery",
]  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """A final tool result before the model sees it (LC-137, LC-138)."""

    status: ToolResultStatus
    source: ToolResultSource
    output: Any = None
    error: Any = None
    message: str | None = None
    reason: str | None = None


def apply_tool_result(
    result: ToolResult, decision: ReplaceOutput | ReplaceMessage | Continue | None
) -> ToolResult:
    """The result after one after_tool_result decision; the source is kept.

    ``ReplaceOutput`` makes the result successful (a failure turned into an output, AD-065);
    ``ReplaceMessage`` makes it an error with that text (an output turned into an error).
    """
    if isinstance(decision, ReplaceOutput):
        return dataclasses.replace(
            result, status="output-available", output=decision.output, error=None, message=None
        )
    if isinstance(decision, ReplaceMessage):
        return dataclasses.replace(
            result, status="output-error", output=None, message=decision.message
        )
    return result


PrepareRunResult: TypeAlias = Continue | Respond | Complete | Fail
PrepareModelStepResult: TypeAlias = Continue | Respond | Block
BeforeToolCallResult: TypeAlias = Continue | ReplaceInput | Skip | Reject
AfterToolResultResult: TypeAlias = Continue | ReplaceOutput | ReplaceMessage
AfterStepResult: TypeAlias = NextStep | Complete
