"""The effective model request: what one model step (or one provider attempt) is asked.

A :class:`ModelStepRequest` is frozen, so a hook that assigns a field gets an error (LC-092);
changes go through patches (:mod:`pai_agents.lifecycle.patches`). Collections are stored as
tuples and read-only mappings, which also snapshots the tool list the moment a request is
built: mutating a list a patch was made from cannot widen execution authority (LC-129).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeAlias, TypeVar, cast

from pydantic import BaseModel

from pai_agents.abort import AbortSignal
from pai_agents.lifecycle.model_settings import allowed_model_settings
from pai_agents.lifecycle.output import json_response_format
from pai_agents.messages.model_messages import prune_reasoning
from pai_agents.models.base import (
    LanguageModel,
    ModelMessage,
    ModelRequest,
    ModelSelection,
    ModelSettings,
    ToolChoice,
    ToolSpec,
    provider_tool_definitions,
)

__all__ = [
    "EffectiveModelCall",
    "Instructions",
    "ModelStepRequest",
    "ProviderOptions",
    "frozen_mapping",
    "prune_request",
    "to_model_request",
]

# The AI SDK's instruction value: a string, one system message, or an ordered list of them.
Instructions: TypeAlias = "str | ModelMessage | Sequence[ModelMessage]"
# Provider name -> that provider's JSON options object.
ProviderOptions: TypeAlias = Mapping[str, Mapping[str, Any]]

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_R = TypeVar("_R", bound="EffectiveModelCall")


def frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only shallow copy (top level only, like the request itself)."""
    return MappingProxyType(dict(value)) if value else _EMPTY


@dataclass(frozen=True, kw_only=True)
class EffectiveModelCall:
    """The model configuration of one step after some layers of patches.

    ``tools`` names the registered PAI tools advertised (and executable) in this call;
    ``available_tools`` is the authority patches choose from (registered and enabled this
    step), ``declared_provider_tools`` the agent's provider-tool definitions.
    """

    model: LanguageModel
    instructions: Instructions | None = None
    messages: tuple[ModelMessage, ...] = ()
    tools: tuple[str, ...] = ()
    provider_tools: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    tool_choice: ToolChoice | None = None
    model_settings: ModelSettings = field(default_factory=lambda: ModelSettings())
    provider_options: ProviderOptions = field(default_factory=lambda: _EMPTY)
    available_tools: tuple[str, ...] = ()
    declared_provider_tools: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    # Structured output (TH-021), set only by a run patch: a pydantic model class.
    output: type[BaseModel] | None = None

    def __post_init__(self) -> None:
        # Top-level read-only (LC-092): containers become tuples and read-only mappings.
        for name in ("model_settings", "provider_options", "provider_tools"):
            value = getattr(self, name)
            if not isinstance(value, MappingProxyType):
                object.__setattr__(self, name, frozen_mapping(value))
        for name in ("messages", "tools", "available_tools"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))

    @classmethod
    def from_selection(
        cls,
        selection: ModelSelection | LanguageModel,
        *,
        instructions: Instructions | None = None,
        messages: Sequence[ModelMessage] = (),
        tools: Sequence[str] = (),
        provider_tools: Mapping[str, Any] | None = None,
    ) -> EffectiveModelCall:
        """The first layer: the agent's ModelSelection (LC-083), all enabled tools advertised."""
        if isinstance(selection, ModelSelection):
            model, settings, options = (
                selection.model,
                selection.settings,
                selection.provider_options,
            )
        else:
            model, settings, options = selection, ModelSettings(), {}
        declared = frozen_mapping(provider_tools)
        return cls(
            model=model,
            instructions=instructions,
            messages=tuple(messages),
            tools=tuple(tools),
            provider_tools=declared,
            model_settings=cast(ModelSettings, allowed_model_settings(settings)),  # AD-021
            provider_options=frozen_mapping(options),
            available_tools=tuple(tools),
            declared_provider_tools=declared,
        )


@dataclass(frozen=True, kw_only=True)
class ModelStepRequest(EffectiveModelCall):
    """The complete request hooks see; the first five fields are runtime-owned (LC-093)."""

    run_id: str
    thread_id: str
    step_index: int
    signal: AbortSignal = field(default_factory=AbortSignal)
    runtime_context: Any = None

    @classmethod
    def for_step(
        cls,
        call: EffectiveModelCall,
        *,
        run_id: str,
        thread_id: str,
        step_index: int,
        signal: AbortSignal,
        runtime_context: Any,
    ) -> ModelStepRequest:
        values = {f.name: getattr(call, f.name) for f in dataclasses.fields(EffectiveModelCall)}
        return cls(
            run_id=run_id,
            thread_id=thread_id,
            step_index=step_index,
            signal=signal,
            runtime_context=runtime_context,
            **values,
        )


RUNTIME_OWNED_FIELDS: frozenset[str] = frozenset(
    {"run_id", "thread_id", "step_index", "runtime_context", "available_tools",
     "declared_provider_tools"}
)  # fmt: skip


def prune_request(request: _R) -> _R:
    """The request as the provider attempt gets it: stale reasoning removed (LC-097..LC-100).

    Applied after every patch, immediately before the attempt; hooks and history reads keep
    seeing unpruned context (LC-101) and stored messages are untouched (LC-102).
    """
    pruned = prune_reasoning(list(request.messages))
    return dataclasses.replace(request, messages=tuple(pruned))


def to_model_request(
    request: EffectiveModelCall, tool_specs: Mapping[str, ToolSpec]
) -> ModelRequest:
    """The provider-neutral :class:`ModelRequest` for an (already pruned) request.

    A string instruction becomes ``system``; structured instructions are sent as leading
    system messages in their order, keeping message-local provider options (AD-024, AD-025).
    Only the tools the request advertises are sent (LC-128), and only the provider tools it
    selected, as their provider-native definitions (AD-071, LC-089); ``output`` becomes the
    JSON ``response_format`` (TH-021).
    """
    system: str | None = None
    leading: list[ModelMessage] = []
    instructions = request.instructions
    if isinstance(instructions, str):
        system = instructions
    elif isinstance(instructions, Mapping):
        leading = [dict(instructions)]
    elif instructions is not None:
        leading = [dict(m) for m in instructions]
    return ModelRequest(
        messages=[*leading, *(dict(m) for m in request.messages)],
        system=system,
        tools=[tool_specs[name] for name in request.tools if name in tool_specs],
        tool_choice=request.tool_choice,
        settings=cast(ModelSettings, dict(request.model_settings)),
        provider_options={k: dict(v) for k, v in request.provider_options.items()},
        response_format=None if request.output is None else json_response_format(request.output),
        provider_tools=provider_tool_definitions(request.provider_tools),
    )
