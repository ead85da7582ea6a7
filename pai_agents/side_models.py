"""Side model calls: short requests beside a run (thread titles, reasoning summaries).

Both options share one shape: an optional ``model`` (a bare LanguageModel, or a resolver
returning one; never a ModelSelection, because side calls take none of the run's settings
or provider options), optional ``instructions`` (a value or a builder called per call) and
an optional custom ``generator`` that replaces the model call. The checks, the resolution
and the text-only model call live here once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pai_agents._callables import call_user
from pai_agents.abort import AbortSignal
from pai_agents.behavior import (
    AgentBehaviorInput,
    AgentDefinitionError,
    InstructionsValue,
    instructions_value,
)
from pai_agents.models.base import LanguageModel, ModelRequest, ModelSelection, ModelSettings

__all__ = [
    "DEFAULT_SIDE_TIMEOUT_SECONDS",
    "SideCallInput",
    "SideModelAgent",
    "bounded_request",
    "check_bounds",
    "check_side_options",
    "complete_line",
    "complete_text",
    "first_line",
    "resolve_side_instructions",
    "resolve_side_model",
    "side_option",
]

OptionT = TypeVar("OptionT")
# How long one side call may take, whole (its runtime_context builder included for titles).
DEFAULT_SIDE_TIMEOUT_SECONDS = 10.0
QUOTES = "\"'`*_\u201c\u201d\u2018\u2019\u00ab\u00bb"


class SideModelAgent(Protocol):
    """What a side model needs of its agent (an ``AgentDefinition`` is one): its name, for
    errors, and its model resolver, for the default of a side model."""

    @property
    def name(self) -> str: ...

    async def resolve_model(self, behavior: AgentBehaviorInput) -> ModelSelection: ...


@dataclass(frozen=True, kw_only=True)
class SideCallInput:
    """The run facts every side call's builders and generators receive."""

    thread_id: str
    run_id: str
    identity: Mapping[str, Any]
    client_data: Mapping[str, Any]
    runtime_context: Any
    signal: AbortSignal = field(default_factory=AbortSignal)

    def behavior(self) -> AgentBehaviorInput:
        """The same run facts as model resolvers take them."""
        return AgentBehaviorInput(
            identity=self.identity,
            client_data=self.client_data,
            runtime_context=self.runtime_context,
            thread_id=self.thread_id,
            run_id=self.run_id,
            signal=self.signal,
        )


def check_side_options(
    option: str, *, model: Any, instructions: Any, generator: Any, rule: str
) -> None:
    """Definition-time checks of ``model`` / ``instructions`` / ``generator``."""
    if isinstance(model, ModelSelection):
        raise AgentDefinitionError(
            f"{option}: model must be a bare LanguageModel (or a resolver returning one), not "
            f"a ModelSelection: side calls take no run settings ({rule})"
        )
    if model is not None and not isinstance(model, LanguageModel) and not callable(model):
        raise AgentDefinitionError(
            f"{option}: model must be a LanguageModel or a resolver, not {model!r}"
        )
    if instructions is not None and not callable(instructions):
        instructions_value(instructions, agent=option)  # AD-024 shape
    if generator is not None and not callable(generator):
        raise AgentDefinitionError(f"{option}: generator must be callable")


def check_bounds(option: str, *, max_output_tokens: Any, timeout_seconds: Any) -> None:
    """Definition-time checks of a side call's output limit and deadline."""
    tokens = max_output_tokens
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise AgentDefinitionError(
            f"{option}: max_output_tokens must be a positive integer, not {tokens!r}"
        )
    seconds = timeout_seconds
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise AgentDefinitionError(
            f"{option}: timeout_seconds must be a positive number, not {seconds!r}"
        )


def bounded_request(request: ModelRequest, max_output_tokens: int) -> ModelRequest:
    """``request`` with the side call's own output limit: the only setting it carries (none
    of the run's settings, AD-046/AD-054), so a local single-slot server is held briefly."""
    settings: ModelSettings = {"maxOutputTokens": max_output_tokens}
    return ModelRequest(
        messages=request.messages,
        system=request.system,
        settings=settings,
    )


def side_option(agent: str, option: str, value: object, kind: type[OptionT]) -> OptionT | None:
    """``define_agent(option=...)``: None/False is off, True the defaults (AD-007)."""
    if value is None or value is False:
        return None
    if value is True:
        return kind()
    if isinstance(value, kind):
        return value
    raise AgentDefinitionError(
        f"agent {agent!r}: {option} must be None, True, False or {kind.__name__}(...), "
        f"not {type(value).__name__}"
    )


async def resolve_side_model(
    source: Any,
    behavior: Any,
    otherwise: Callable[[], Awaitable[LanguageModel]],
    *,
    agent: str,
    option: str,
    rule: str,
) -> LanguageModel:
    """The option's model (resolved with ``behavior``), else ``otherwise()``: the run's
    model without its settings."""
    if source is None:
        return await otherwise()
    if not isinstance(source, LanguageModel) and callable(source):
        source = await call_user(source, behavior)
    if isinstance(source, ModelSelection) or not isinstance(source, LanguageModel):
        raise AgentDefinitionError(
            f"agent {agent!r}: the {option} model resolver returned {type(source).__name__}; "
            f"it must return a bare LanguageModel ({rule})"
        )
    return source


async def resolve_side_instructions(
    value: Any, call_input: Any, *, agent: str, default: InstructionsValue
) -> InstructionsValue:
    """The builder's value for this call (or the fixed value), else ``default``."""
    if callable(value):
        value = await call_user(value, call_input)
    resolved = instructions_value(value, agent=agent)
    return default if resolved is None else resolved


async def complete_text(
    model: LanguageModel, request: ModelRequest, *, signal: AbortSignal | None = None
) -> str:
    """The text of one model step (reasoning and tool calls ignored)."""
    texts: list[str] = []
    async for part in model.stream(request, signal=signal):
        if part.get("type") == "text-delta":
            texts.append(str(part.get("delta", "")))
    return "".join(texts)


async def complete_line(
    model: LanguageModel,
    request: ModelRequest,
    *,
    signal: AbortSignal | None = None,
    label: str | None = None,
) -> str:
    """The text of one model step up to its first usable line (see :func:`first_line`):
    reading stops there and the stream is closed, so the provider stops generating too
    (the rest of the answer would be thrown away)."""
    texts: list[str] = []
    stream = model.stream(request, signal=signal)
    try:
        async for part in stream:
            if part.get("type") != "text-delta":
                continue
            delta = str(part.get("delta", ""))
            texts.append(delta)
            if "\n" in delta:
                text = "".join(texts)
                done, _, _ = text.rpartition("\n")
                if first_line(done, label=label):
                    return done
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    return "".join(texts)


def first_line(text: str | None, *, label: str | None = None) -> str:
    """A model's answer as a label: its first non-empty line, without a ``label:`` prefix,
    wrapping quotes or final punctuation."""
    if not text:
        return ""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if label and line.lower().startswith(f"{label}:"):
        line = line[len(label) + 1 :]
    return line.strip().strip(QUOTES).strip().rstrip(".!;:").strip(QUOTES)
