"""Execution-local model-only messages and episode defaults (LC-074..LC-076, LC-150..152).

The overlay starts with prepare_run's ``append_model_messages``, changes with after_step
``NextStep`` patches, and is appended after resolve_model_context returns, so resolvers
neither see nor drop it (LC-052). It is never stored. The engine discards it on waiting or
resume, steering, completion, cancellation and lease loss (LC-151).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pai_agents.abort import AbortSignal
from pai_agents.lifecycle.patches import RunPatch, apply_patch
from pai_agents.lifecycle.request import EffectiveModelCall, Instructions, ModelStepRequest
from pai_agents.lifecycle.results import NextStepPatch
from pai_agents.models.base import LanguageModel, ModelMessage, ModelSelection

__all__ = ["EpisodeState", "ModelOverlay"]


class ModelOverlay:
    """Model-only context of one uninterrupted execution episode."""

    def __init__(self, messages: Sequence[ModelMessage] = ()) -> None:
        self._messages: tuple[ModelMessage, ...] = tuple(messages)

    @property
    def messages(self) -> tuple[ModelMessage, ...]:
        return self._messages

    def apply(self, patch: NextStepPatch | None) -> None:
        if patch is None:
            return
        if patch.replace_model_messages is not None:
            self._messages = tuple(patch.replace_model_messages)
        else:
            self._messages = (*self._messages, *(patch.append_model_messages or ()))

    def discard(self) -> None:
        self._messages = ()

    def extend(self, resolved: Sequence[ModelMessage]) -> tuple[ModelMessage, ...]:
        """The step's messages: resolved base context, then the overlay (LC-052)."""
        return (*resolved, *self._messages)


@dataclass(kw_only=True)
class EpisodeState:
    """Episode-local defaults from prepare_run; step patches never touch it (LC-078)."""

    run_patch: RunPatch | None = None
    agent_max_steps: int = 10
    overlay: ModelOverlay = field(default_factory=ModelOverlay)

    @classmethod
    def start(cls, run_patch: RunPatch | None, *, agent_max_steps: int) -> EpisodeState:
        overlay = ModelOverlay(run_patch.append_model_messages or () if run_patch else ())
        return cls(run_patch=run_patch, agent_max_steps=agent_max_steps, overlay=overlay)

    @property
    def max_steps(self) -> int:
        """prepare_run ``max_steps`` overrides the agent's ceiling for this episode (LC-076)."""
        if self.run_patch is not None and self.run_patch.max_steps is not None:
            return self.run_patch.max_steps
        return self.agent_max_steps

    @property
    def send_reasoning(self) -> bool:
        """False when prepare_run keeps this episode's reasoning from clients (TH-016)."""
        return self.run_patch is None or self.run_patch.send_reasoning is not False

    @property
    def needs_model_resolver(self) -> bool:
        """The root model resolver is skipped when prepare_run chose a model (AD-018)."""
        return self.run_patch is None or self.run_patch.model is None

    @property
    def needs_instructions(self) -> bool:
        """The instruction builder is skipped when prepare_run supplied instructions (AD-026)."""
        return self.run_patch is None or self.run_patch.instructions is None

    def step_request(
        self,
        selection: ModelSelection | LanguageModel,
        *,
        instructions: Instructions | None,
        resolved_context: Sequence[ModelMessage],
        tools: Sequence[str],
        provider_tools: dict[str, object] | None = None,
        run_id: str,
        thread_id: str,
        step_index: int,
        signal: AbortSignal,
        runtime_context: object,
    ) -> ModelStepRequest:
        """The request prepare_model_step starts from: agent layer, then the run patch."""
        base = EffectiveModelCall.from_selection(
            selection,
            instructions=instructions,
            messages=self.overlay.extend(resolved_context),
            tools=tools,
            provider_tools=provider_tools,
        )
        request = ModelStepRequest.for_step(
            base,
            run_id=run_id,
            thread_id=thread_id,
            step_index=step_index,
            signal=signal,
            runtime_context=runtime_context,
        )
        # append_model_messages of the run patch live in the overlay, not in each request.
        return apply_patch(request, self.run_patch)
