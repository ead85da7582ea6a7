"""``AgentLifecycle``: the hooks an agent can override, and the adapters for plain objects.

Subclass :class:`AgentLifecycle` and override only the phases you need (every method may
be ``def`` or ``async def``, LC-001), or pass a mapping / plain object of callables to
:func:`as_lifecycle` or :func:`~pai_agents.lifecycle.compose.compose_lifecycle`.
A hook returning None means "no change" (LC-002).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias, TypeVar

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
from pai_agents.lifecycle.request import ModelStepRequest
from pai_agents.lifecycle.results import (
    AfterStepResult,
    AfterToolResultResult,
    BeforeToolCallResult,
    HistoryRewritePatch,
    PrepareModelStepResult,
    PrepareRunResult,
)
from pai_agents.lifecycle.streams import ModelStepStreamResult
from pai_agents.models.base import ModelMessage

__all__ = [
    "PHASES",
    "AgentLifecycle",
    "ContextNext",
    "LifecycleLike",
    "MaybeAwaitable",
    "ModelCallNext",
    "as_lifecycle",
    "overridden_phases",
]

T = TypeVar("T")
MaybeAwaitable: TypeAlias = "T | Awaitable[T]"
ContextNext: TypeAlias = Callable[..., Awaitable[list[ModelMessage]]]
ModelCallNext: TypeAlias = Callable[..., Awaitable[ModelStepStreamResult]]

PHASES: Final = (
    "prepare_run",
    "resolve_model_context",
    "prepare_history_rewrite",
    "history_rewritten",
    "prepare_model_step",
    "around_model_call",
    "transform_step_stream",
    "before_tool_call",
    "after_tool_result",
    "after_step",
    "run_finished",
)


class AgentLifecycle:
    """Base class with a no-op for every phase; override what you need.

    ``name`` is used in diagnostics and composed traces (LC-005); it defaults to the class
    name for subclasses.
    """

    name: str | None = None

    def prepare_run(self, input: PrepareRunInput) -> MaybeAwaitable[PrepareRunResult | None]:
        """Once per execution episode, before any model step: guardrails, quotas, routing."""
        return None

    async def resolve_model_context(
        self, input: ResolveModelContextInput, next: ContextNext
    ) -> Sequence[ModelMessage]:
        """Middleware choosing the step's base context; ``next()`` / ``next(base)``."""
        return await next()

    def prepare_history_rewrite(
        self, input: PrepareHistoryRewriteInput
    ) -> MaybeAwaitable[HistoryRewritePatch | None]:
        """Metadata patches committed in the same transaction as a history rewrite."""
        return None

    def history_rewritten(self, input: HistoryRewrittenInput) -> MaybeAwaitable[None]:
        """Best-effort, post-commit fact about a rewrite."""
        return None

    def prepare_model_step(
        self, input: PrepareModelStepInput
    ) -> MaybeAwaitable[PrepareModelStepResult | None]:
        """Before every model step: RAG, routing, per-step tools, guardrails."""
        return None

    async def around_model_call(
        self, input: ModelStepRequest, next: ModelCallNext
    ) -> ModelStepStreamResult:
        """Wrap one provider call; ``next()`` or ``next(patch)``; first part outermost."""
        return await next()

    def transform_step_stream(self, input: TransformStepStreamInput) -> MaybeAwaitable[StepStream]:
        """Return the canonical step stream (what is published and persisted)."""
        return input.stream

    def before_tool_call(
        self, input: BeforeToolCallInput
    ) -> MaybeAwaitable[BeforeToolCallResult | None]:
        """Before a validated call is executed, routed to a client or suspended."""
        return None

    def after_tool_result(
        self, input: AfterToolResultInput
    ) -> MaybeAwaitable[AfterToolResultResult | None]:
        """For every final tool result, before the model sees it."""
        return None

    def after_step(self, input: AfterStepInput) -> MaybeAwaitable[AfterStepResult | None]:
        """After the step's message is assembled, before the step/run transition commits."""
        return None

    def run_finished(self, input: RunFinishedInput) -> MaybeAwaitable[None]:
        """After the run's final state committed and its lease was released (TH-041)."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {lifecycle_name(self)!r}>"


LifecycleLike: TypeAlias = "AgentLifecycle | Mapping[str, Any] | object"


def lifecycle_name(part: AgentLifecycle, default: str | None = None) -> str:
    if part.name:
        return part.name
    if type(part) is not AgentLifecycle and type(part).__name__ != "_AdaptedLifecycle":
        return type(part).__name__
    return default or "lifecycle"


def overridden_phases(part: AgentLifecycle) -> tuple[str, ...]:
    """The phases ``part`` actually implements (no-op defaults are skipped, not traced)."""
    own = getattr(part, "_phases", None)
    if own is not None:
        return tuple(own)
    return tuple(p for p in PHASES if getattr(type(part), p) is not getattr(AgentLifecycle, p))


class _AdaptedLifecycle(AgentLifecycle):
    """A mapping or plain object of phase callables presented as an AgentLifecycle."""

    def __init__(self, hooks: Mapping[str, Callable[..., Any]], name: str | None) -> None:
        self.name = name
        self._phases = tuple(p for p in PHASES if p in hooks)
        for phase in self._phases:
            setattr(self, phase, hooks[phase])


def as_lifecycle(value: LifecycleLike) -> AgentLifecycle:
    """An :class:`AgentLifecycle` for a lifecycle, a mapping of hooks, or a hook object.

    Mapping keys must be phase names or ``name``; an unknown key is an error (typos would
    otherwise silently disable a policy).
    """
    if isinstance(value, AgentLifecycle):
        return value
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {*PHASES, "name"})
        if unknown:
            raise TypeError(f"unknown lifecycle hooks {unknown}; phases are {list(PHASES)}")
        hooks = {k: v for k, v in value.items() if k != "name" and v is not None}
        name = value.get("name")
    else:
        hooks = {p: getattr(value, p) for p in PHASES if getattr(value, p, None) is not None}
        name = getattr(value, "name", None)
        if not hooks:
            raise TypeError(f"{value!r} implements no lifecycle phase")
    for phase, hook in hooks.items():
        if not callable(hook):
            raise TypeError(f"lifecycle hook {phase!r} is not callable: {hook!r}")
    return _AdaptedLifecycle(hooks, name if isinstance(name, str) else None)
