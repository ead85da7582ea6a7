"""Reasoning summaries: the ``reasoning_summary=`` option and its generator (AD-007,
AD-050..AD-054).

Framework-free on purpose: the definition is checked here when the agent is defined;
:mod:`pai_agents.engine.reasoning_summaries` starts one generation per closed reasoning part
while the step streams and stores the results with the step message
(:mod:`pai_agents.messages.reasoning_summary`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from pai_agents._callables import call_user
from pai_agents.abort import AbortSignal
from pai_agents.agent import (
    AgentBehaviorInput,
    AgentDefinition,
    AgentDefinitionError,
    InstructionsValue,
    instructions_split,
    instructions_value,
)
from pai_agents.models.base import LanguageModel, ModelMessage, ModelRequest, ModelSelection

__all__ = [
    "DEFAULT_REASONING_SUMMARY_INSTRUCTIONS",
    "MAX_SUMMARY_LENGTH",
    "ReasoningSummary",
    "ReasoningSummaryInput",
    "clean_summary",
    "generate_reasoning_summary",
    "reasoning_summary_option",
    "summary_request",
]

Operation: TypeAlias = Literal["send", "trigger", "regenerate", "resume"]

DEFAULT_REASONING_SUMMARY_INSTRUCTIONS = (
    "You label a model's reasoning. Reply with a short label for the reasoning you are given: "
    "at most eight words, in its language, describing what it works out, without quotes or "
    "final punctuation. Reply with the label only."
)
MAX_SUMMARY_LENGTH = 200
_MAX_REASONING_CHARS = 8_000
_QUOTES = "\"'`*_\u201c\u201d\u2018\u2019\u00ab\u00bb"


@dataclass(frozen=True, kw_only=True)
class ReasoningSummaryInput:
    """What a summary instruction builder and a custom generator receive (AD-052).

    ``reasoning_ordinal`` is the part's zero-based position among the reasoning parts of its
    model-step message ``message_id``; ``reasoning`` is the part's complete text;
    ``operation`` is how the run's current episode started (``send``, ``trigger``,
    ``regenerate``, or ``resume`` for a later episode).
    """

    thread_id: str
    run_id: str
    message_id: str
    reasoning_ordinal: int
    reasoning: str
    operation: Operation
    started_at: str
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


@dataclass(frozen=True, kw_only=True)
class ReasoningSummary:
    """Reasoning summaries; pass as ``define_agent(reasoning_summary=...)``.

    ``model`` is a bare :class:`LanguageModel` or a resolver ``(AgentBehaviorInput) ->
    LanguageModel``; a :class:`ModelSelection` is refused because summary calls never take
    the main run's settings or provider options (AD-054). Without it the run's selected model
    is used, bare. ``instructions`` is an instructions value or a builder
    ``(ReasoningSummaryInput) -> instructions``, called for each closed reasoning part sent
    to the default summarizer (AD-053). ``generator`` ``(ReasoningSummaryInput) -> str |
    None`` replaces the default summarizer: ``model`` and ``instructions`` are then never
    used (AD-053). A None or empty result stores no summary.
    """

    model: LanguageModel | Callable[[AgentBehaviorInput], Any] | None = None
    instructions: (
        str | ModelMessage | Sequence[ModelMessage] | Callable[[ReasoningSummaryInput], Any] | None
    ) = None
    generator: Callable[[ReasoningSummaryInput], Any] | None = None

    def __post_init__(self) -> None:
        model = self.model
        if isinstance(model, ModelSelection):
            raise AgentDefinitionError(
                "reasoning_summary: model must be a bare LanguageModel (or a resolver "
                "returning one), not a ModelSelection: summary calls take no run settings "
                "(AD-054)"
            )
        if model is not None and not isinstance(model, LanguageModel) and not callable(model):
            raise AgentDefinitionError(
                f"reasoning_summary: model must be a LanguageModel or a resolver, not {model!r}"
            )
        if self.instructions is not None and not callable(self.instructions):
            instructions_value(self.instructions, agent="reasoning_summary")  # AD-024 shape
        if self.generator is not None and not callable(self.generator):
            raise AgentDefinitionError("reasoning_summary: generator must be callable")

    async def resolve_model(
        self, agent: AgentDefinition, behavior: AgentBehaviorInput, selected: LanguageModel
    ) -> LanguageModel:
        """The summary model, else the run's ``selected`` model without its settings
        (AD-054)."""
        source: Any = self.model
        if source is None:
            return selected
        if not isinstance(source, LanguageModel) and callable(source):
            source = await call_user(source, behavior)
        if isinstance(source, ModelSelection) or not isinstance(source, LanguageModel):
            raise AgentDefinitionError(
                f"agent {agent.name!r}: the reasoning_summary model resolver returned "
                f"{type(source).__name__}; it must return a bare LanguageModel (AD-054)"
            )
        return source

    async def resolve_instructions(
        self, summary_input: ReasoningSummaryInput, *, agent: str
    ) -> InstructionsValue:
        """The builder's value for this part (AD-053), else the default concise prompt."""
        value: Any = self.instructions
        if callable(value):
            value = await call_user(value, summary_input)
        resolved = instructions_value(value, agent=agent)
        return DEFAULT_REASONING_SUMMARY_INSTRUCTIONS if resolved is None else resolved


def reasoning_summary_option(agent: str, value: object) -> ReasoningSummary | None:
    """``define_agent(reasoning_summary=...)``: off unless configured; True is the default
    summarizer (AD-007)."""
    if value is None or value is False:
        return None
    if value is True:
        return ReasoningSummary()
    if isinstance(value, ReasoningSummary):
        return value
    raise AgentDefinitionError(
        f"agent {agent!r}: reasoning_summary must be None, True, False or "
        f"ReasoningSummary(...), not {type(value).__name__}"
    )


async def generate_reasoning_summary(
    agent: AgentDefinition,
    config: ReasoningSummary,
    summary_input: ReasoningSummaryInput,
    *,
    selected: LanguageModel,
) -> str | None:
    """The summary of one closed reasoning part, or None to store none.

    A custom generator is the only thing called when set (AD-053); otherwise the
    instructions are resolved for this part (AD-053) and the summary model, else the run's
    ``selected`` model, answers a request without the run's settings or provider options
    (AD-054).
    """
    if config.generator is not None:
        value = await call_user(config.generator, summary_input)
        if value is not None and not isinstance(value, str):
            raise TypeError(
                f"a reasoning summary generator returns a string or None, not "
                f"{type(value).__name__}"
            )
        return normalize_summary(value)
    model = await config.resolve_model(agent, summary_input.behavior(), selected)
    instructions = await config.resolve_instructions(summary_input, agent=agent.name)
    request = summary_request(instructions, summary_input.reasoning)
    texts: list[str] = []
    async for part in model.stream(request, signal=summary_input.signal):
        if part.get("type") == "text-delta":
            texts.append(str(part.get("delta", "")))
    return clean_summary("".join(texts))


def summary_request(instructions: Any, reasoning: str) -> ModelRequest:
    """Instructions first (as the engine places them), then the reasoning as one user
    message; no tools, settings or provider options (AD-054)."""
    system, leading = instructions_split(instructions)
    text = (
        reasoning if len(reasoning) <= _MAX_REASONING_CHARS else reasoning[-_MAX_REASONING_CHARS:]
    )
    content = {"role": "user", "content": [{"type": "text", "text": text}]}
    return ModelRequest(system=system, messages=[*leading, content])


def normalize_summary(value: str | None) -> str | None:
    """Whitespace folded and cut to :data:`MAX_SUMMARY_LENGTH`; None when empty."""
    if not value:
        return None
    summary = " ".join(value.split())[:MAX_SUMMARY_LENGTH].strip()
    return summary or None


def clean_summary(text: str | None) -> str | None:
    """A model's answer as a label: its first non-empty line, without wrapping quotes or
    final punctuation."""
    if not text:
        return None
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = line.strip(_QUOTES).strip().rstrip(".!;:").strip(_QUOTES)
    return normalize_summary(line)
