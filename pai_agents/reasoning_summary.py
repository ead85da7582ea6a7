"""Reasoning summaries: the ``reasoning_summary=`` option and its generator (AD-007,
AD-050..AD-054).

Framework-free on purpose: the definition is checked here when the agent is defined;
:mod:`pai_agents.engine.reasoning_summaries` starts one generation per closed reasoning part
while the step streams and stores the results with the step message
(:mod:`pai_agents.messages.reasoning_summary`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from pai_agents._callables import call_user
from pai_agents.behavior import (
    AgentBehaviorInput,
    InstructionsValue,
    instructions_split,
)
from pai_agents.models.base import LanguageModel, ModelMessage, ModelRequest
from pai_agents.side_models import (
    DEFAULT_SIDE_TIMEOUT_SECONDS,
    SideCallInput,
    SideModelAgent,
    bounded_request,
    check_bounds,
    check_side_options,
    complete_line,
    first_line,
    resolve_side_instructions,
    resolve_side_model,
    side_option,
)

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


@dataclass(frozen=True, kw_only=True)
class ReasoningSummaryInput(SideCallInput):
    """What a summary instruction builder and a custom generator receive (AD-052).

    ``reasoning_ordinal`` is the part's zero-based position among the reasoning parts of its
    model-step message ``message_id``; ``reasoning`` is the part's complete text;
    ``operation`` is how the run's current episode started (``send``, ``trigger``,
    ``regenerate``, or ``resume`` for a later episode).
    """

    message_id: str
    reasoning_ordinal: int
    reasoning: str
    operation: Operation
    started_at: str


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

    Bounded like thread titles, because the step's end waits for its summaries: the default
    call asks for at most ``max_output_tokens`` and stops at the first usable line; a
    summary not ready within ``timeout_seconds`` (a custom generator too) is dropped.
    """

    model: LanguageModel | Callable[[AgentBehaviorInput], Any] | None = None
    instructions: (
        str | ModelMessage | Sequence[ModelMessage] | Callable[[ReasoningSummaryInput], Any] | None
    ) = None
    generator: Callable[[ReasoningSummaryInput], Any] | None = None
    max_output_tokens: int = 48
    timeout_seconds: float = DEFAULT_SIDE_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        check_bounds(
            "reasoning_summary",
            max_output_tokens=self.max_output_tokens,
            timeout_seconds=self.timeout_seconds,
        )
        check_side_options(
            "reasoning_summary",
            model=self.model,
            instructions=self.instructions,
            generator=self.generator,
            rule="AD-054",
        )

    async def resolve_model(
        self, agent: SideModelAgent, behavior: AgentBehaviorInput, selected: LanguageModel
    ) -> LanguageModel:
        """The summary model, else the run's ``selected`` model without its settings
        (AD-054)."""

        async def run_model() -> LanguageModel:
            return selected

        return await resolve_side_model(
            self.model,
            behavior,
            run_model,
            agent=agent.name,
            option="reasoning_summary",
            rule="AD-054",
        )

    async def resolve_instructions(
        self, summary_input: ReasoningSummaryInput, *, agent: str
    ) -> InstructionsValue:
        """The builder's value for this part (AD-053), else the default concise prompt."""
        return await resolve_side_instructions(
            self.instructions,
            summary_input,
            agent=agent,
            default=DEFAULT_REASONING_SUMMARY_INSTRUCTIONS,
        )


def reasoning_summary_option(agent: str, value: object) -> ReasoningSummary | None:
    """``define_agent(reasoning_summary=...)``: off unless configured; True is the default
    summarizer (AD-007)."""
    return side_option(agent, "reasoning_summary", value, ReasoningSummary)


async def generate_reasoning_summary(
    agent: SideModelAgent,
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
    request = bounded_request(
        summary_request(instructions, summary_input.reasoning), config.max_output_tokens
    )
    return clean_summary(
        await complete_line(model, request, signal=summary_input.signal, label="summary")
    )


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
    return normalize_summary(first_line(text))
