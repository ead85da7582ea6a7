"""Automatic thread titles: the ``thread_titles=`` option and its schedule (AD-007, AD-041..AD-049).

Framework-free on purpose: the definition is checked here when the agent is defined, and the
decision "is a title due?" is a pure function of the stored title record, so every storage
layer applies the same policy. ``pai_threads.titles`` reads and writes the record, runs the
job after completed runs and publishes the thread head; :mod:`pai_agents.title_generation`
calls the generator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, TypeAlias

from pai_agents.behavior import (
    AgentBehaviorInput,
    AgentDefinitionError,
    InstructionsValue,
)
from pai_agents.messages.types import UIMessage
from pai_agents.models.base import LanguageModel, ModelMessage
from pai_agents.side_models import (
    DEFAULT_SIDE_TIMEOUT_SECONDS,
    SideCallInput,
    SideModelAgent,
    check_bounds,
    check_side_options,
    resolve_side_instructions,
    resolve_side_model,
    side_option,
)

__all__ = [
    "DEFAULT_TITLE_INSTRUCTIONS",
    "ThreadTitleInput",
    "ThreadTitles",
    "TitleGenerate",
    "TitleOverwrite",
    "TitleRecord",
    "thread_titles_option",
]

TitleGenerate: TypeAlias = Literal["once", "refresh"]
TitleOverwrite: TypeAlias = Literal["empty", "generated", "always"]
# "" (no title yet), "generated" (written by automatic generation) or "manual" (a rename).
TitleSource: TypeAlias = Literal["", "generated", "manual"]

DEFAULT_TITLE_INSTRUCTIONS = (
    "You name conversations. Reply with a short, specific title for the conversation you are "
    "given: at most six words, in the language of the conversation, without quotes or final "
    "punctuation. Reply with the title only."
)

_OVERWRITE_DEFAULT: dict[str, TitleOverwrite] = {"once": "empty", "refresh": "generated"}


@dataclass(frozen=True, kw_only=True)
class ThreadTitleInput(SideCallInput):
    """What a title instruction builder and a custom generator receive (AD-047, AD-048).

    ``run_id`` is the completed run whose end scheduled this call; ``messages`` are the
    thread's most recent transcript messages (UIMessages, oldest first); ``title`` and
    ``title_source`` are the record being replaced.
    """

    title: str
    title_source: str
    messages: Sequence[UIMessage]


@dataclass(frozen=True, kw_only=True)
class TitleRecord:
    """A thread's stored title record plus its counters now: what the schedule compares.

    ``runs`` and ``messages`` count the thread's completed runs and transcript messages now;
    the ``*_at_generation`` counters are their values when the last automatic title was
    stored (``generated_at``).
    """

    title: str
    source: str
    generated_at: datetime | None
    runs: int = 0
    messages: int = 0
    runs_at_generation: int = 0
    messages_at_generation: int = 0


@dataclass(frozen=True, kw_only=True)
class ThreadTitles:
    """Automatic thread titles; pass as ``define_agent(thread_titles=...)``.

    ``generate``: ``"once"`` stores at most one automatic title; ``"refresh"`` regenerates
    whenever all configured thresholds are met since the last automatic title (AD-043):
    ``after_messages`` new transcript messages, ``after_runs`` completed runs, ``min_age_ms``
    elapsed; unset thresholds do not hold it back. ``overwrite`` says which titles automatic
    generation may replace (AD-044): ``"empty"`` (none yet; the default for ``once``),
    ``"generated"`` (none, or an automatic one; the default for ``refresh``) or ``"always"``
    (manual renames too, AD-045).

    ``model`` is a bare :class:`LanguageModel` or a resolver ``(AgentBehaviorInput) ->
    LanguageModel``; a :class:`ModelSelection` is refused because title calls never take the
    main run's settings or provider options (AD-046). Without it the agent's selected model
    is used, bare. ``instructions`` is an instructions value or a builder
    ``(ThreadTitleInput) -> instructions``, called for each default title call (AD-047).
    ``generator`` ``(ThreadTitleInput) -> str | None`` replaces the default call entirely:
    ``model`` and ``instructions`` are then never used (AD-048). A None or empty result
    leaves the title unchanged (AD-049).
    """

    generate: TitleGenerate = "once"
    overwrite: TitleOverwrite | None = None
    after_messages: int | None = None
    after_runs: int | None = None
    min_age_ms: int | None = None
    model: LanguageModel | Callable[[AgentBehaviorInput], Any] | None = None
    instructions: (
        str | ModelMessage | Sequence[ModelMessage] | Callable[[ThreadTitleInput], Any] | None
    ) = None
    generator: Callable[[ThreadTitleInput], Any] | None = None
    max_output_tokens: int = 32
    timeout_seconds: float = DEFAULT_SIDE_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        check_bounds(
            "thread_titles",
            max_output_tokens=self.max_output_tokens,
            timeout_seconds=self.timeout_seconds,
        )
        if self.generate not in _OVERWRITE_DEFAULT:
            raise AgentDefinitionError(
                f"thread_titles: generate must be 'once' or 'refresh', not {self.generate!r}"
            )
        if self.overwrite is None:
            object.__setattr__(self, "overwrite", _OVERWRITE_DEFAULT[self.generate])
        elif self.overwrite not in ("empty", "generated", "always"):
            raise AgentDefinitionError(
                "thread_titles: overwrite must be 'empty', 'generated' or 'always', "
                f"not {self.overwrite!r}"
            )
        for name in ("after_messages", "after_runs", "min_age_ms"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise AgentDefinitionError(
                    f"thread_titles: {name} must be a non-negative integer, not {value!r}"
                )
            if self.generate != "refresh":
                raise AgentDefinitionError(
                    f"thread_titles: {name} is a refresh threshold; set generate='refresh'"
                )
        check_side_options(
            "thread_titles",
            model=self.model,
            instructions=self.instructions,
            generator=self.generator,
            rule="AD-046",
        )

    # -- the schedule --

    def may_replace(self, record: TitleRecord) -> bool:
        """Whether the overwrite policy lets automatic generation replace this title."""
        if self.overwrite == "always":
            return True
        if record.source == "manual":  # AD-045, even a manual rename to no title
            return False
        return self.overwrite == "generated" or not record.title

    def due(self, record: TitleRecord, now: datetime) -> bool:
        """Whether a title should be generated now (AD-043, AD-044)."""
        if not self.may_replace(record):
            return False
        if record.generated_at is None:
            return True
        if self.generate == "once":
            return False
        if self.after_runs and record.runs - record.runs_at_generation < self.after_runs:
            return False
        if (
            self.after_messages
            and record.messages - record.messages_at_generation < self.after_messages
        ):
            return False
        age = now - record.generated_at
        return not (self.min_age_ms and age < timedelta(milliseconds=self.min_age_ms))

    # -- the default generator's inputs --

    async def resolve_model(
        self, agent: SideModelAgent, behavior: AgentBehaviorInput
    ) -> LanguageModel:
        """The title model, else the agent's selected model without its settings (AD-046)."""

        async def selected() -> LanguageModel:
            return (await agent.resolve_model(behavior)).model

        return await resolve_side_model(
            self.model, behavior, selected, agent=agent.name, option="thread_titles", rule="AD-046"
        )

    async def resolve_instructions(
        self, title_input: ThreadTitleInput, *, agent: str
    ) -> InstructionsValue:
        """The builder's value for this call (AD-047), else the default concise prompt."""
        return await resolve_side_instructions(
            self.instructions, title_input, agent=agent, default=DEFAULT_TITLE_INSTRUCTIONS
        )


def thread_titles_option(agent: str, value: object) -> ThreadTitles | None:
    """``define_agent(thread_titles=...)``: off unless configured; True is the default
    one-shot generator (AD-007)."""
    return side_option(agent, "thread_titles", value, ThreadTitles)
