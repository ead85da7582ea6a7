"""``observe(extension)``: Think-style extension hooks as an error-isolating lifecycle part.

A raising PAI hook fails its run, and hooks receive live objects. Extensions (TH-045..TH-048)
are the opposite: they get JSON-serializable snapshots, they only observe, and their
failures are logged (``pai.lifecycle`` logger, never shown to clients) without touching the
run. An extension is an object or a mapping with any of these callables (``def`` or
``async def``), each taking one snapshot dict (camelCase keys, as in the peer):

* ``before_turn`` (the first prepare_model_step of an episode, where the request is
  assembled): system, toolNames, messageCount, continuation, body, modelId;
* ``before_tool_call`` (before_tool_call): toolName, toolCallId, input, stepNumber;
* ``after_tool_call`` (after_tool_result): the same plus durationMs, success, output or
  error;
* ``on_step_finish`` (after_step): stepNumber, finishReason, text, reasoningText,
  toolCallCount, toolResultCount, usage, providerMetadata;
* ``on_chunk`` (a pass-through transform_step_stream): type, text?, toolName?, toolCallId?.

Return values are discarded, except ``before_turn``'s (TH-047): a mapping of scalar config
(``system``, ``toolChoice``, ``activeTools``, ``maxSteps`` and the model settings keys,
e.g. ``temperature``) that applies to every model step of the episode from then on, as a
run patch would. Other keys are logged and ignored. The part runs where it is placed in
``compose_lifecycle``, so after the primary parts before it (TH-045).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final

from pai_agents._callables import call_user
from pai_agents.lifecycle.hooks import AgentLifecycle
from pai_agents.lifecycle.inputs import (
    AfterStepInput,
    AfterToolResultInput,
    BeforeToolCallInput,
    LifecycleRun,
    PrepareModelStepInput,
    StepStream,
    TransformStepStreamInput,
)
from pai_agents.lifecycle.patches import MODEL_SETTINGS_KEYS, ModelStepPatch
from pai_agents.lifecycle.request import ModelStepRequest
from pai_agents.lifecycle.results import Complete, Continue
from pai_agents.models.base import StepStreamPart

__all__ = ["EXTENSION_HOOKS", "ExtensionObserver", "observe"]

logger = logging.getLogger("pai.lifecycle")

# Extension hook -> the PAI phases it needs.
EXTENSION_HOOKS: Final[Mapping[str, tuple[str, ...]]] = {
    "before_turn": ("prepare_model_step", "after_step"),
    "before_tool_call": ("before_tool_call",),
    "after_tool_call": ("after_tool_result",),
    "on_step_finish": ("after_step",),
    "on_chunk": ("transform_step_stream",),
}
_CONFIG_KEYS: Final = frozenset({"system", "toolChoice", "activeTools", "maxSteps"}) | (
    MODEL_SETTINGS_KEYS - {"reasoning"}
)
_TOOL_CHOICES: Final = frozenset({"auto", "none", "required"})
_RESULT_STATES: Final = frozenset({"output-available", "output-error", "output-denied"})


@dataclasses.dataclass(kw_only=True)
class _Turn:
    """What ``before_turn`` decided for one execution episode."""

    patch: ModelStepPatch | None
    first_step: int
    max_steps: int | None


class ExtensionObserver(AgentLifecycle):
    """The lifecycle part :func:`observe` returns (see the module docstring)."""

    def __init__(self, extension: Any, *, name: str) -> None:
        self.name = name
        self._hooks = _extension_hooks(extension)
        self._phases = tuple(
            dict.fromkeys(phase for hook in self._hooks for phase in EXTENSION_HOOKS[hook])
        )
        # Per execution episode, keyed by the episode's LifecycleRun (one object per episode),
        # dropped with it: parts are shared by every run of the agent.
        self._turns: dict[int, _Turn] = {}

    # -- phases --

    async def prepare_model_step(self, input: PrepareModelStepInput) -> Continue | None:
        turn = self._turns.get(id(input.run))
        if turn is None:
            turn = await self._before_turn(input)
            self._remember(input.run, turn)
        return Continue(patch=turn.patch) if turn.patch is not None else None

    async def before_tool_call(self, input: BeforeToolCallInput) -> None:
        await self._notify("before_tool_call", input.run, _tool_snapshot, input)

    async def after_tool_result(self, input: AfterToolResultInput) -> None:
        await self._notify("after_tool_call", input.run, _result_snapshot, input)

    async def after_step(self, input: AfterStepInput) -> Complete | None:
        if "on_step_finish" in self._hooks:
            await self._notify("on_step_finish", input.run, _step_snapshot, input)
        turn = self._turns.get(id(input.run))
        if turn is not None and turn.max_steps is not None:
            taken = input.step.index - turn.first_step + 1
            return Complete() if taken >= turn.max_steps else None  # before_turn's maxSteps
        return None

    def transform_step_stream(self, input: TransformStepStreamInput) -> StepStream:
        async def observed() -> AsyncIterator[StepStreamPart]:
            async for part in input.stream:
                await self._notify("on_chunk", input.run, _chunk_snapshot, part)
                yield part  # unchanged: the extension cannot alter the output

        return observed()

    # -- helpers --

    async def _before_turn(self, input: PrepareModelStepInput) -> _Turn:
        config = await self._notify("before_turn", input.run, _turn_snapshot, input)
        patch, max_steps = self._config(config, input.run)
        return _Turn(patch=patch, first_step=input.step.index, max_steps=max_steps)

    def _remember(self, run: LifecycleRun, turn: _Turn) -> None:
        key = id(run)
        try:
            weakref.finalize(run, self._turns.pop, key, None)
        except TypeError:  # not weak-referenceable: the config applies to this step only
            return
        self._turns[key] = turn

    async def _notify(
        self, hook: str, run: LifecycleRun, snapshot: Callable[[Any], Any], source: Any
    ) -> Any:
        """Call one extension hook with ``snapshot(source)``; a failure is logged, never
        raised (TH-048)."""
        fn = self._hooks.get(hook)
        if fn is None:
            return None
        try:
            return await call_user(fn, _json_safe(snapshot(source)))
        except Exception:
            logger.warning(
                "extension %r failed in %s; the run goes on",
                self.name,
                hook,
                exc_info=True,
                extra={"run_id": run.run_id},
            )
            return None

    def _config(self, config: Any, run: LifecycleRun) -> tuple[ModelStepPatch | None, int | None]:
        """before_turn's scalar config as a step patch plus a step ceiling (TH-047)."""
        if config is None:
            return None, None
        if not isinstance(config, Mapping):
            self._ignored(run, f"before_turn returned {type(config).__name__}, not a mapping")
            return None, None
        fields: dict[str, Any] = {}
        settings: dict[str, Any] = {}
        max_steps: int | None = None
        for key, value in config.items():
            if key not in _CONFIG_KEYS or not _valid(key, value):
                self._ignored(run, f"unsupported before_turn config {key!r}={value!r}")
            elif key == "system":
                fields["instructions"] = value
            elif key == "toolChoice":
                fields["tool_choice"] = value
            elif key == "activeTools":
                fields["tools"] = list(value)
            elif key == "maxSteps":
                max_steps = value
            else:
                settings[key] = value
        if settings:
            fields["model_settings"] = settings
        return (ModelStepPatch(**fields) if fields else None), max_steps

    def _ignored(self, run: LifecycleRun, what: str) -> None:
        logger.warning("extension %r: %s", self.name, what, extra={"run_id": run.run_id})


def observe(extension: Any, *, name: str | None = None) -> ExtensionObserver:
    """Wrap a Think-style extension (object or mapping of hooks) as a lifecycle part.

    Place it after your own parts in ``define_agent(lifecycle=[...])``.
    """
    label = name or getattr(extension, "name", None)
    if not isinstance(label, str) or not label:
        label = "extension" if isinstance(extension, Mapping) else type(extension).__name__
    return ExtensionObserver(extension, name=label)


def _extension_hooks(extension: Any) -> dict[str, Callable[..., Any]]:
    if isinstance(extension, Mapping):
        unknown = sorted(set(extension) - set(EXTENSION_HOOKS) - {"name"})
        if unknown:
            raise TypeError(f"unknown extension hooks {unknown}; hooks are {list(EXTENSION_HOOKS)}")
        found = {k: v for k, v in extension.items() if k in EXTENSION_HOOKS and v is not None}
    else:
        found = {k: getattr(extension, k) for k in EXTENSION_HOOKS if hasattr(extension, k)}
    if not found:
        raise TypeError(f"{extension!r} implements no extension hook {list(EXTENSION_HOOKS)}")
    for hook, fn in found.items():
        if not callable(fn):
            raise TypeError(f"extension hook {hook!r} is not callable: {fn!r}")
    return found


def _valid(key: str, value: Any) -> bool:
    if key == "system":
        return isinstance(value, str)
    if key == "toolChoice":
        return value in _TOOL_CHOICES
    if key in ("activeTools", "stopSequences"):
        # A bare str is a Sequence of str too: it would become one name per character.
        return (
            isinstance(value, Sequence)
            and not isinstance(value, str)
            and all(isinstance(v, str) for v in value)
        )
    if isinstance(value, bool):
        return False
    if key in ("maxSteps", "maxOutputTokens", "topK", "seed"):
        return isinstance(value, int) and (key != "maxSteps" or value >= 1)
    return isinstance(value, int | float) and math.isfinite(value)


def _json_safe(value: Any) -> Any:
    """A deep JSON copy: the extension can neither mutate run state nor keep live objects."""
    return json.loads(json.dumps(value, default=str))


# -- snapshots (TH-046) ---------------------------------------------------------------------


def _system_text(request: ModelStepRequest) -> str | None:
    instructions = request.instructions
    if instructions is None or isinstance(instructions, str):
        return instructions
    messages = [instructions] if isinstance(instructions, Mapping) else list(instructions)
    texts = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        else:
            texts += [str(c.get("text", "")) for c in content or () if c.get("type") == "text"]
    return "\n".join(texts)


def _turn_snapshot(input: PrepareModelStepInput) -> dict[str, Any]:
    request = input.input
    body = input.runtime_context if isinstance(input.runtime_context, Mapping) else None
    return {
        "system": _system_text(request),
        "toolNames": list(request.tools),
        "messageCount": len(request.messages),
        "continuation": input.run.execution.operation == "resume",
        "body": _json_or_none(body),
        "modelId": request.model.model_id,
    }


def _json_or_none(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return None


def _tool_snapshot(input: BeforeToolCallInput) -> dict[str, Any]:
    return {
        "toolName": input.tool.name,
        "toolCallId": input.call.tool_call_id,
        "input": input.input,
        "stepNumber": input.step.index,
    }


def _result_snapshot(input: AfterToolResultInput) -> dict[str, Any]:
    result = input.result
    snapshot = {**_tool_snapshot(input), "durationMs": input.duration_ms}
    if result.status == "output-available":
        snapshot.update(success=True, output=result.output)
    else:
        snapshot.update(success=False, error=result.message)
    return snapshot


def _step_snapshot(input: AfterStepInput) -> dict[str, Any]:
    step = input.step
    parts = step.message.parts
    reasoning = [str(p.get("text", "")) for p in parts if p.get("type") == "reasoning"]
    return {
        "stepNumber": step.index,
        "finishReason": step.finish_reason,
        "text": "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text"),
        "reasoningText": "".join(reasoning) if reasoning else None,
        "toolCallCount": len(step.tool_calls),
        "toolResultCount": sum(1 for p in parts if p.get("state") in _RESULT_STATES),
        "usage": dict(step.usage or {}),
        "providerMetadata": dict(step.provider_metadata) if step.provider_metadata else None,
    }


def _chunk_snapshot(part: StepStreamPart) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "part":  # a hook-authored native part (synthetic responses)
        native = part.get("part") or {}
        return {"type": str(native.get("type")), "text": native.get("text")}
    snapshot: dict[str, Any] = {"type": kind}
    if "delta" in part:
        snapshot["text"] = part["delta"]
    if "toolName" in part:
        snapshot["toolName"] = part["toolName"]
    if kind in ("tool-input-start", "tool-input-delta", "tool-input-end"):
        snapshot["toolCallId"] = part.get("id")
    elif "toolCallId" in part:
        snapshot["toolCallId"] = part["toolCallId"]
    return snapshot
