"""Sparse model patches and the exact order and merge rules that layer them (LC-083..LC-089).

A patch field left as ``None`` is "not supplied". Layers apply in this order, later winning::

    agent ModelSelection -> prepare_run patch -> prepare_model_step patches, left to right
      -> around_model_call patches, outside to inside

* ``model_settings`` merge key by key (a key set to None removes it); keys outside the
  portable allowlist are never forwarded (AD-021).
* ``provider_options`` merge by provider key only; a later entry replaces that provider's
  whole dict (a provider set to None removes it).
* ``tools``, ``tool_choice``, ``provider_tools`` and ``instructions`` replace whole values.
* ``output`` (run patch only, TH-021) asks for schema-validated structured output: the
  request gets the schema and loses every tool, including ones later layers would select.
* A patch that supplies ``model`` (even the same object) starts a fresh route: inherited
  settings, provider options, provider tools and tool choice are cleared before the patch's
  own values apply; registered PAI tools and instructions stay unless replaced.

Only the prepare_run patch is episode-local state; step and call patches are applied to a
copy of the step's request and never carry into the next step (LC-078, LC-088).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

from pydantic import BaseModel

from pai_agents.abort import AbortSignal
from pai_agents.lifecycle.model_settings import (
    MODEL_SETTINGS_KEYS,
    SNAKE_CASE_SETTINGS,
    LifecyclePatchError,
    allowed_model_settings,
)
from pai_agents.lifecycle.request import (
    RUNTIME_OWNED_FIELDS,
    EffectiveModelCall,
    Instructions,
    ModelStepRequest,
    ProviderOptions,
    frozen_mapping,
)
from pai_agents.lifecycle.signals import combine_signals
from pai_agents.models.base import (
    LanguageModel,
    ModelMessage,
    ModelSelection,
    ModelSettings,
    ProviderTool,
    ToolChoice,
)

__all__ = [
    "MODEL_SETTINGS_KEYS",
    "SNAKE_CASE_SETTINGS",
    "LifecyclePatchError",
    "ModelCallPatch",
    "ModelStepPatch",
    "RunPatch",
    "allowed_model_settings",
    "apply_patch",
    "coerce_patch",
    "merge_model_settings",
    "merge_patches",
    "merge_provider_options",
    "resolve_model_call",
]

# What a fresh route (a patch supplying ``model``) clears (LC-089).
_ROUTE_STATE: Final = ("model_settings", "provider_options", "provider_tools", "tool_choice")


@dataclass(frozen=True, kw_only=True)
class _RoutePatch:
    model: LanguageModel | None = None
    instructions: Instructions | None = None
    tools: Sequence[str] | None = None
    provider_tools: Mapping[str, Any] | None = None
    tool_choice: ToolChoice | None = None
    model_settings: ModelSettings | Mapping[str, Any] | None = None
    provider_options: ProviderOptions | None = None

    def __post_init__(self) -> None:
        # Snapshot the caller's containers: mutating them later changes nothing (LC-129).
        for name in ("tools", "messages", "append_model_messages"):
            value = getattr(self, name, None)
            if value is not None:
                if isinstance(value, str | Mapping):
                    raise LifecyclePatchError(f"{name} must be a sequence, not {value!r}")
                object.__setattr__(self, name, tuple(value))
        for name in ("provider_tools", "model_settings", "provider_options"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, frozen_mapping(value))


@dataclass(frozen=True, kw_only=True)
class RunPatch(_RoutePatch):
    """prepare_run ``continue`` patch: episode-local defaults for every later step (LC-074).

    Run-level only, as in the peer (no step patch has them):

    * ``max_retries`` sets the run's retries of a model step after transient provider
      faults (TH-019), over the agent's ``max_retries``.
    * ``send_reasoning=False`` keeps the episode's model reasoning away from clients and
      storage while every later step of the episode still gets it (TH-016).
    * ``output`` (a pydantic model class) forces structured output: tools are disabled, the
      provider gets the model's JSON schema as its response format, and the final text must
      validate or the run fails with :class:`~pai_agents.lifecycle.StructuredOutputError`
      (TH-021).
    """

    append_model_messages: Sequence[ModelMessage] | None = None
    max_steps: int | None = None
    send_reasoning: bool | None = None
    output: type[BaseModel] | None = None
    # Retries of each model step after a transient provider fault (TH-019: a run sets its
    # own retry count, e.g. 0); None keeps the agent's.
    max_retries: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_steps is not None and self.max_steps < 1:
            raise LifecyclePatchError("max_steps must be at least 1")
        _check_max_retries(self.max_retries)
        if self.output is not None and not (
            isinstance(self.output, type) and issubclass(self.output, BaseModel)
        ):
            raise LifecyclePatchError(f"output must be a pydantic model class, not {self.output!r}")


@dataclass(frozen=True, kw_only=True)
class ModelStepPatch(_RoutePatch):
    """prepare_model_step ``continue`` patch: this step only (LC-078).

    ``max_retries`` sets this step's retries after transient provider faults, over the run
    patch's and the agent's; the retry loop wraps ``around_model_call``, so a call patch
    cannot set it (each retry calls the hook again, once).
    """

    messages: Sequence[ModelMessage] | None = None
    append_model_messages: Sequence[ModelMessage] | None = None
    max_retries: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_max_retries(self.max_retries)


@dataclass(frozen=True, kw_only=True)
class ModelCallPatch(ModelStepPatch):
    """``next(patch)`` in around_model_call; ``signal`` is combined with the run's (LC-094)."""

    signal: AbortSignal | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_retries is not None:
            raise LifecyclePatchError(
                "max_retries cannot be set per provider call: the step's retries wrap "
                "around_model_call; set it in a prepare_model_step or prepare_run patch"
            )


def _check_max_retries(retries: object) -> None:
    if retries is not None and (isinstance(retries, bool) or not isinstance(retries, int)):
        raise LifecyclePatchError(f"max_retries must be an integer, not {retries!r}")
    if isinstance(retries, int) and retries < 0:
        raise LifecyclePatchError("max_retries must be at least 0")


_P = TypeVar("_P", bound=_RoutePatch)
_R = TypeVar("_R", bound=EffectiveModelCall)


def coerce_patch(value: object, cls: type[_P]) -> _P:
    """Accept a patch of ``cls`` (or a compatible patch) or a mapping of its field names.

    Runtime-owned request fields are refused (LC-093), so passing or spreading a request
    into ``next()`` fails instead of silently rewriting the run's identity.
    """
    if isinstance(value, cls):
        return value
    names = {f.name for f in dataclasses.fields(cls)}
    if isinstance(value, EffectiveModelCall):
        raise LifecyclePatchError(
            f"a model request is not a patch; return a sparse {cls.__name__} instead"
        )
    if isinstance(value, _RoutePatch):
        items = {
            f.name: getattr(value, f.name)
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not None
        }
    elif isinstance(value, Mapping):
        items = dict(value)
    else:
        raise LifecyclePatchError(f"expected a {cls.__name__} or a mapping, got {value!r}")
    owned = sorted(set(items) & RUNTIME_OWNED_FIELDS)
    if owned:
        raise LifecyclePatchError(f"runtime-owned request fields cannot be patched: {owned}")
    unknown = sorted(set(items) - names)
    if unknown:
        raise LifecyclePatchError(f"{cls.__name__} has no fields {unknown}")
    return cls(**items)


def merge_model_settings(
    current: Mapping[str, Any], patch: Mapping[str, Any], *, drop_none: bool = True
) -> ModelSettings:
    """Field-by-field merge; only allowlisted keys survive (LC-084, AD-021)."""
    merged = {**allowed_model_settings(current), **allowed_model_settings(patch, strict=True)}
    if drop_none:
        merged = {k: v for k, v in merged.items() if v is not None}
    return cast(ModelSettings, merged)


def merge_provider_options(
    current: ProviderOptions, patch: Mapping[str, Any], *, drop_none: bool = True
) -> ProviderOptions:
    """Shallow merge by provider key: a provider's dict is replaced whole (LC-085)."""
    merged = {**current, **patch}
    if drop_none:
        merged = {k: v for k, v in merged.items() if v is not None}
    return frozen_mapping({k: frozen_mapping(v) if v is not None else v for k, v in merged.items()})


def _checked_provider_tools(
    declared: Mapping[str, Any], selected: Mapping[str, Any]
) -> Mapping[str, Any]:
    """Patches may select declared provider tools only, by their exact definition (AD-072).

    A declared :class:`ProviderTool` may be reused as is or as its plain definition mapping;
    either way the request keeps the declared value (and its input schema).
    """
    for name, definition in selected.items():
        if name not in declared:
            raise LifecyclePatchError(f"provider tool {name!r} is not declared by the agent")
        if not _same_definition(declared[name], definition):
            raise LifecyclePatchError(f"provider tool {name!r} differs from its declaration")
    return frozen_mapping({name: declared[name] for name in selected})


def _same_definition(declared: Any, given: Any) -> bool:
    if given is declared or given == declared:
        return True
    return (
        isinstance(declared, ProviderTool)
        and isinstance(given, Mapping)
        and dict(given) == dict(declared.definition)
    )


def apply_patch(request: _R, patch: object) -> _R:
    """One layer: the request with ``patch`` applied by the rules in the module docstring."""
    if patch is None:
        return request
    p = coerce_patch(patch, ModelCallPatch if isinstance(patch, Mapping) else _RoutePatch)
    changes: dict[str, Any] = {}
    if p.model is not None:
        changes.update(
            model=p.model,
            model_settings=ModelSettings(),
            provider_options=frozen_mapping(None),
            provider_tools=frozen_mapping(None),
            tool_choice=None,
        )
    settings = changes.get("model_settings", request.model_settings)
    options = changes.get("provider_options", request.provider_options)
    if p.model_settings is not None:
        changes["model_settings"] = merge_model_settings(settings, p.model_settings)
    if p.provider_options is not None:
        changes["provider_options"] = merge_provider_options(options, p.provider_options)
    if p.provider_tools is not None:
        changes["provider_tools"] = _checked_provider_tools(
            request.declared_provider_tools, p.provider_tools
        )
    if p.tool_choice is not None:
        changes["tool_choice"] = p.tool_choice
    if p.instructions is not None:
        changes["instructions"] = p.instructions
    if p.tools is not None:
        # Authoritative for execution (LC-128): only tools available this step can be chosen.
        available = set(request.available_tools)
        changes["tools"] = tuple(dict.fromkeys(n for n in p.tools if n in available))
    if isinstance(p, ModelStepPatch):
        messages = request.messages if p.messages is None else tuple(p.messages)
        if p.append_model_messages:
            messages = (*messages, *p.append_model_messages)
        if p.messages is not None or p.append_model_messages:
            changes["messages"] = messages
    if isinstance(p, ModelCallPatch) and p.signal is not None:
        if not isinstance(request, ModelStepRequest):
            raise LifecyclePatchError("a signal patch needs a ModelStepRequest")
        changes["signal"] = combine_signals(request.signal, p.signal)
    if isinstance(p, RunPatch) and p.output is not None:
        # TH-021: no tool is available any more, provider tools included, so no later layer
        # can select one (LC-128).
        changes.update(
            output=p.output,
            tools=(),
            available_tools=(),
            tool_choice=None,
            provider_tools=frozen_mapping(None),
            declared_provider_tools=frozen_mapping(None),
        )
    return dataclasses.replace(request, **changes) if changes else request


def merge_patches(first: _P | None, second: _P | None) -> _P | None:
    """One patch equivalent to applying ``first`` and then ``second`` (used by composition)."""
    if first is None or second is None:
        return second if first is None else first
    if type(first) is not type(second):
        raise LifecyclePatchError(
            f"cannot merge {type(first).__name__} with {type(second).__name__}"
        )
    values: dict[str, Any] = {}
    fresh = second.model is not None
    for f in dataclasses.fields(second):
        a, b = getattr(first, f.name), getattr(second, f.name)
        if fresh and f.name in _ROUTE_STATE:
            values[f.name] = b
        elif f.name == "model_settings" and a is not None and b is not None:
            values[f.name] = merge_model_settings(a, b, drop_none=False)
        elif f.name == "provider_options" and a is not None and b is not None:
            values[f.name] = merge_provider_options(a, b, drop_none=False)
        elif f.name == "append_model_messages":
            if getattr(second, "messages", None) is not None:
                values[f.name] = b  # a later replacement drops earlier appends
            else:
                values[f.name] = (*(a or ()), *(b or ())) if a or b else None
        elif f.name == "signal" and a is not None and b is not None:
            values[f.name] = combine_signals(a, b)
        else:
            values[f.name] = b if b is not None else a
    return type(second)(**values)


def resolve_model_call(
    base: _R | ModelSelection | LanguageModel, *patches: object
) -> _R | EffectiveModelCall:
    """Fold ``patches`` (None entries skipped) over ``base`` in argument order (LC-083)."""
    request: EffectiveModelCall = (
        base if isinstance(base, EffectiveModelCall) else EffectiveModelCall.from_selection(base)
    )
    for patch in patches:
        request = apply_patch(request, patch)
    return request
