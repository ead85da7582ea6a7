"""``define_agent``: the server-side definition of an agent.

A definition is a frozen value: it creates no storage, routes or workers. The Django layer
registers definitions by dotted path (``PAI["AGENTS"]``) and runs them through the engine.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import BaseModel, TypeAdapter, ValidationError

from pai_agents._callables import call_user
from pai_agents.abort import AbortSignal
from pai_agents.json import NotStrictJson
from pai_agents.lifecycle.compose import ComposedLifecycle, compose_lifecycle
from pai_agents.lifecycle.metadata import (
    AgentMetadataSchemas,
    MetadataSchemaError,
    MetadataSchemas,
)
from pai_agents.models.base import LanguageModel, ModelMessage, ModelSelection, ProviderTool
from pai_agents.tools import Tool

if TYPE_CHECKING:
    from pai_agents.reasoning_summary import ReasoningSummary
    from pai_agents.titles import ThreadTitles

__all__ = [
    "AgentBehaviorInput",
    "AgentDefinition",
    "AgentDefinitionError",
    "InvalidAgentInput",
    "ToolConfig",
    "ToolOutputInput",
    "define_agent",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class AgentDefinitionError(ValueError):
    """An agent definition is malformed; raised at definition time, never in a run."""


class InvalidAgentInput(ValueError):
    """Identity or client data did not match the agent's schema."""


@dataclass(frozen=True, kw_only=True)
class AgentBehaviorInput:
    """What instruction, model and runtime-context builders receive.

    ``signal`` is the run's abort signal: it fires when the run is cancelled or stopped
    (AD-013, AD-016).
    """

    identity: Mapping[str, Any]
    client_data: Mapping[str, Any]
    runtime_context: Any
    thread_id: str
    run_id: str
    signal: AbortSignal = field(default_factory=AbortSignal)


@dataclass(frozen=True, kw_only=True)
class ToolConfig:
    """A tool registered with per-agent options (AD-055..AD-069).

    ``enabled``: a bool or ``(AgentBehaviorInput) -> bool`` (sync or async), evaluated
    before every model step and when its pending action resumes; a disabled tool is not
    advertised and cannot execute (the manifest still lists it). ``map_context``:
    ``(AgentBehaviorInput) -> value`` given to the tool as ``ctx.context``. ``on_output``:
    called with a :class:`ToolOutputInput` for each settled successful output, after
    after_tool_result and before the model sees it; its return value is ignored and an
    exception fails the run.
    """

    tool: Tool
    enabled: bool | Callable[[AgentBehaviorInput], Any] = True
    map_context: Callable[[AgentBehaviorInput], Any] | None = None
    on_output: Callable[[ToolOutputInput], Any] | None = None


@dataclass(frozen=True, kw_only=True)
class ToolOutputInput(AgentBehaviorInput):
    """What ``on_output`` receives: the behaviour input plus the typed input and output."""

    input: Any
    output: Any
    tool_name: str
    tool_call_id: str


SendPolicy: TypeAlias = Literal["queue", "reject", "interrupt", "steer"]
# A string, one system message, or an ordered list of system messages (AD-024); message-local
# ``providerOptions`` stay on their message (AD-025).
InstructionsValue: TypeAlias = "str | ModelMessage | list[ModelMessage]"
Instructions: TypeAlias = (
    "str | ModelMessage | Sequence[ModelMessage] | Callable[[AgentBehaviorInput], Any]"
)
ModelSource: TypeAlias = "LanguageModel | ModelSelection | Callable[[AgentBehaviorInput], Any]"
RuntimeContextBuilder: TypeAlias = "Callable[[AgentBehaviorInput], Any]"


@dataclass(frozen=True, kw_only=True)
class AgentDefinition:
    """A registered agent. Build it with :func:`define_agent`."""

    name: str
    # The application's version, else a fingerprint PAI supplies (AD-002).
    version: str
    instructions: Instructions
    model: ModelSource
    tools: Mapping[str, Tool]
    max_steps: int = 10
    runtime_context: RuntimeContextBuilder | None = None
    identity_schema: type[BaseModel] | None = None
    client_data_schema: type[BaseModel] | None = None
    description: str = ""
    # What a send does while a run is active: queue it (default), reject it (409), interrupt
    # the active run, or steer it (join its next model step). Overridable per send.
    send_policy: SendPolicy = "queue"
    # Lifecycle hooks (docs/lifecycle-integration.md), composed once at definition time;
    # None: no phase is overridden, so the run loop calls none.
    lifecycle: ComposedLifecycle | None = None
    # Per-registration options (``enabled``, ``map_context``, ``on_output``), by tool name.
    tool_configs: Mapping[str, ToolConfig] = field(default_factory=dict)
    # Called with a RuntimeErrorReport when a run fails on an exception (hooks included);
    # clients only ever see the failed status.
    on_runtime_error: Callable[..., Any] | None = None
    # ``data-<name>`` payload schemas the lifecycle ``ui_data`` writer accepts.
    ui_data_schemas: Mapping[str, Any] = field(default_factory=dict)
    # Typed ``{private, public}`` metadata schema pairs (AD-027..AD-033); None: strict JSON.
    run_metadata: MetadataSchemas | None = None
    thread_metadata: MetadataSchemas | None = None
    message_metadata: MetadataSchemas | None = None
    # Provider-defined tools by registration name (AD-071): sent to the provider, run there,
    # never by PAI; patches may select a subset by their exact definitions (AD-072).
    provider_tools: Mapping[str, ProviderTool] = field(default_factory=dict)
    # Automatic thread titles after completed runs (AD-007, AD-041..AD-049); None: off.
    thread_titles: ThreadTitles | None = None
    # Reasoning-part summaries while steps stream (AD-007, AD-050..AD-054); None: off.
    reasoning_summary: ReasoningSummary | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def metadata_schemas(self) -> AgentMetadataSchemas:
        """The three schema pairs, as the stores and facades take them."""
        return AgentMetadataSchemas(
            run=self.run_metadata, thread=self.thread_metadata, message=self.message_metadata
        )

    def manifest(self) -> dict[str, Any]:
        """A JSON-serializable description: name, version and the tools the model may see.

        Provider tools are listed by name only: a definition may carry credentials (an MCP
        server's headers, say), which the manifest must never hold (AD-076).
        """
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "maxSteps": self.max_steps,
            "tools": [t.manifest() for t in self.tools.values()],
            "providerTools": list(self.provider_tools),
            "threadTitles": self.thread_titles is not None,
            "reasoningSummary": self.reasoning_summary is not None,
        }

    def validate_identity(self, identity: Mapping[str, Any]) -> dict[str, Any]:
        return _validate(self.identity_schema, identity, "identity")

    def validate_client_data(self, client_data: Mapping[str, Any] | None) -> dict[str, Any]:
        return _validate(self.client_data_schema, client_data or {}, "client_data")

    async def resolve_instructions(self, behavior: AgentBehaviorInput) -> InstructionsValue | None:
        """The instructions for one model step: a string, one system message or a list of
        system messages, kept as given (AD-024, AD-025)."""
        value: Any = self.instructions
        if callable(value):
            value = await call_user(value, behavior)
        return instructions_value(value, agent=self.name)

    async def resolve_model(self, behavior: AgentBehaviorInput) -> ModelSelection:
        source = self.model
        if not isinstance(source, ModelSelection | LanguageModel) and callable(source):
            source = await call_user(source, behavior)
        if isinstance(source, ModelSelection):
            return source
        if isinstance(source, LanguageModel):
            return ModelSelection(model=source)
        raise AgentDefinitionError(
            f"agent {self.name!r}: model resolver returned {type(source).__name__}, "
            "expected a LanguageModel or ModelSelection"
        )

    async def build_runtime_context(self, behavior: AgentBehaviorInput) -> Any:
        if self.runtime_context is None:
            return None
        return await call_user(self.runtime_context, behavior)


def instructions_value(value: Any, *, agent: str) -> InstructionsValue | None:
    """Check and normalize an instructions value (AD-024): None, a string, one system
    message (a mapping) or a sequence of system messages; anything else becomes ``str()``."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return _system_message(value, agent)
    if isinstance(value, Sequence):
        return [_system_message(item, agent) for item in value]
    return str(value)


def instructions_split(
    value: InstructionsValue | None,
) -> tuple[str | None, list[ModelMessage]]:
    """``(system, leading messages)`` for a provider request: a string is the system
    prompt; structured instructions become leading system messages, in order (AD-024)."""
    if value is None or isinstance(value, str):
        return value, []
    if isinstance(value, Mapping):
        return None, [dict(value)]
    return None, [dict(m) for m in value]


def _system_message(item: Any, agent: str) -> ModelMessage:
    if not isinstance(item, Mapping) or item.get("role") != "system":
        raise AgentDefinitionError(
            f"agent {agent!r}: structured instructions are system messages "
            f"({{'role': 'system', 'content': ...}}), not {item!r}"
        )
    return dict(item)


def _is_pydantic_schema(schema: Any) -> bool:
    return isinstance(schema, TypeAdapter) or (
        isinstance(schema, type) and issubclass(schema, BaseModel)
    )


def _default_version(
    name: str,
    tools: Mapping[str, Tool],
    max_steps: int,
    provider_tools: Mapping[str, ProviderTool],
) -> str:
    """A stable version PAI supplies when the application gives none (AD-002): a
    fingerprint of the definition's declared surface."""
    surface: dict[str, Any] = {
        "name": name,
        "maxSteps": max_steps,
        "tools": {key: tool.manifest() for key, tool in sorted(tools.items())},
    }
    if provider_tools:  # only then, so existing fingerprints stay as they were
        surface["providerTools"] = {k: dict(t.definition) for k, t in provider_tools.items()}
    digest = hashlib.sha256(json.dumps(surface, sort_keys=True, default=str).encode())
    return f"pai-{digest.hexdigest()[:12]}"


def _provider_tools(
    agent: str, given: Mapping[str, Any] | None, tools: Mapping[str, Tool]
) -> dict[str, ProviderTool]:
    """Check ``provider_tools=`` (AD-071): names that no registered tool uses (a call must say
    unambiguously who runs it), values a :class:`ProviderTool` or a strict-JSON definition."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise AgentDefinitionError(
            f"agent {agent!r}: provider_tools must map names to provider tool definitions"
        )
    checked: dict[str, ProviderTool] = {}
    for key, value in given.items():
        if not isinstance(key, str) or not _NAME.match(key):
            raise AgentDefinitionError(
                f"agent {agent!r}: provider tool name {key!r} must match {_NAME.pattern}"
            )
        if key in tools:
            raise AgentDefinitionError(
                f"agent {agent!r}: provider tool {key!r} clashes with a registered tool"
            )
        if isinstance(value, ProviderTool):
            checked[key] = value
            continue
        try:
            checked[key] = ProviderTool(definition=value)
        except (TypeError, NotStrictJson) as exc:
            raise AgentDefinitionError(f"agent {agent!r}: provider_tools[{key!r}]: {exc}") from exc
    return checked


def _validate(
    schema: type[BaseModel] | None, value: Mapping[str, Any], what: str
) -> dict[str, Any]:
    if schema is None:
        return dict(value)
    try:
        return schema.model_validate(dict(value)).model_dump(mode="json")
    except ValidationError as exc:
        raise InvalidAgentInput(f"{what} does not match the agent's schema: {exc}") from exc


def define_agent(
    name: str,
    *,
    instructions: Instructions,
    model: ModelSource,
    version: str | None = None,
    description: str = "",
    tools: Iterable[Tool | ToolConfig] | Mapping[str, Tool | ToolConfig] = (),
    max_steps: int = 10,
    runtime_context: RuntimeContextBuilder | None = None,
    identity: type[BaseModel] | None = None,
    client_data: type[BaseModel] | None = None,
    send_policy: SendPolicy = "queue",
    lifecycle: Any = None,
    on_runtime_error: Callable[..., Any] | None = None,
    ui_data_schemas: Mapping[str, Any] | None = None,
    stop_when: Sequence[Callable[..., Any]] = (),
    run_metadata: MetadataSchemas | None = None,
    thread_metadata: MetadataSchemas | None = None,
    message_metadata: MetadataSchemas | None = None,
    provider_tools: Mapping[str, ProviderTool | Mapping[str, Any]] | None = None,
    thread_titles: bool | ThreadTitles | None = None,
    reasoning_summary: bool | ReasoningSummary | None = None,
) -> AgentDefinition:
    """Define an agent.

    ``instructions`` is a string, one system message (``{"role": "system", "content": ...}``,
    optionally with ``providerOptions``), an ordered list of system messages, or a builder
    (sync or async) returning one of those, called for each model step; ``version`` defaults
    to a fingerprint of the declared surface; ``model`` is a
    :class:`LanguageModel`, a :class:`ModelSelection`, or a resolver (sync or async) that
    returns either, called once per run. ``identity`` and ``client_data`` are pydantic
    models validating the trusted caller and the untrusted client data.

    ``lifecycle`` is an :class:`~pai_agents.lifecycle.AgentLifecycle`, a mapping of hook
    callables, or a sequence of either (composed left to right with
    :func:`~pai_agents.lifecycle.compose_lifecycle`). ``on_runtime_error`` receives a
    :class:`~pai_agents.engine.runtime_errors.RuntimeErrorReport` for every run that fails on an
    exception; ``ui_data_schemas`` registers the ``data-*`` parts hooks may write.
    ``stop_when`` conditions (``has_tool_call``, ``step_count_is`` or any callable taking the
    after_step input) end the run after a step as soon as one holds; ``max_steps`` applies too.
    ``run_metadata``, ``thread_metadata`` and ``message_metadata`` are
    :class:`~pai_agents.lifecycle.MetadataSchemas` pairs (pydantic models), checked here:
    each must accept ``{}`` and be canonical strict JSON (AD-027..AD-030).

    ``provider_tools`` maps names to provider-defined tools (AD-071): a
    :class:`~pai_agents.models.ProviderTool`, or just its provider-native JSON definition
    (``{"web_search": {"type": "web_search"}}``). They are sent to the provider with every
    model step and run there; PAI validates the calls the provider reports (LC-127) and never
    executes them. Names must not clash with registered tools.

    ``thread_titles`` turns on automatic thread titles after completed runs (AD-007): True
    for the default one-shot generator, or a :class:`~pai_agents.titles.ThreadTitles`.

    ``reasoning_summary`` labels each reasoning part once it closes, without holding back the
    model stream (AD-007, AD-050): True for the default summarizer, or a
    :class:`~pai_agents.reasoning_summary.ReasoningSummary`. The label shows as ``summary``
    on the reasoning part.
    """
    if not _NAME.match(name):
        raise AgentDefinitionError(f"agent name {name!r} must match {_NAME.pattern}")
    if send_policy not in ("queue", "reject", "interrupt", "steer"):
        raise AgentDefinitionError(f"agent {name!r}: unknown send_policy {send_policy!r}")
    if max_steps < 1:
        raise AgentDefinitionError(f"agent {name!r}: max_steps must be at least 1")
    if version is not None and (not isinstance(version, str) or not version):
        raise AgentDefinitionError(f"agent {name!r}: version must be a non-empty string")
    # AD-005: only pydantic schemas (models, or TypeAdapters where a value is not an object).
    for what, schema in (("identity", identity), ("client_data", client_data)):
        if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise AgentDefinitionError(f"agent {name!r}: {what} must be a pydantic model class")
    for key, schema in (ui_data_schemas or {}).items():
        if not isinstance(key, str) or not key or key.startswith("pai-"):
            raise AgentDefinitionError(
                f"agent {name!r}: ui_data_schemas key {key!r} must be a non-empty name "
                "outside the reserved 'pai-' prefix"
            )
        if not _is_pydantic_schema(schema):
            raise AgentDefinitionError(
                f"agent {name!r}: ui_data_schemas[{key!r}] must be a pydantic model or TypeAdapter"
            )
    if not callable(instructions):
        instructions_value(instructions, agent=name)  # AD-024: checked at definition time
    tool_map: dict[str, Tool] = {}
    configs: dict[str, ToolConfig] = {}
    items = (
        tools.items()
        if isinstance(tools, Mapping)
        else ((t.tool.name if isinstance(t, ToolConfig) else t.name, t) for t in tools)
    )
    for key, entry in items:
        item: Any = entry
        if isinstance(entry, ToolConfig):
            item = entry.tool
            configs[key] = entry
        if not isinstance(item, Tool):
            raise AgentDefinitionError(f"agent {name!r}: {key!r} is not a Tool (use tool())")
        if key != item.name:
            raise AgentDefinitionError(
                f"agent {name!r}: tool key {key!r} != its name {item.name!r}"
            )
        if key in tool_map:
            raise AgentDefinitionError(f"agent {name!r}: duplicate tool {key!r}")
        tool_map[key] = item
    if not (callable(model) or isinstance(model, ModelSelection | LanguageModel)):
        raise AgentDefinitionError(
            f"agent {name!r}: model must be a LanguageModel, ModelSelection or resolver"
        )
    composed: ComposedLifecycle | None = None
    if isinstance(lifecycle, ComposedLifecycle) and not stop_when:
        composed = lifecycle  # kept as given (its name and trace)
    elif lifecycle is not None or stop_when:
        parts = list(lifecycle) if isinstance(lifecycle, list | tuple) else [lifecycle]
        if stop_when:
            from pai_agents.lifecycle.stop import stop_when as stop_part

            parts.append(stop_part(*stop_when))
        try:
            composed = compose_lifecycle(*parts)
        except TypeError as exc:
            raise AgentDefinitionError(f"agent {name!r}: {exc}") from exc
    if composed is not None and not composed.parts:
        composed = None
    if on_runtime_error is not None and not callable(on_runtime_error):
        raise AgentDefinitionError(f"agent {name!r}: on_runtime_error must be callable")
    for what, pair in (
        ("run_metadata", run_metadata),
        ("thread_metadata", thread_metadata),
        ("message_metadata", message_metadata),
    ):
        if pair is None:
            continue
        if not isinstance(pair, MetadataSchemas):
            raise AgentDefinitionError(
                f"agent {name!r}: {what} must be MetadataSchemas(private=..., public=...)"
            )
        try:
            pair.initial()  # AD-028..AD-030, re-checked on the very object registered
        except MetadataSchemaError as exc:
            raise AgentDefinitionError(f"agent {name!r}: {what}: {exc}") from exc
    provider_map = _provider_tools(name, provider_tools, tool_map)
    from pai_agents.titles import thread_titles_option  # it imports this module

    titles = thread_titles_option(name, thread_titles)
    from pai_agents.reasoning_summary import reasoning_summary_option  # it imports this module

    summaries = reasoning_summary_option(name, reasoning_summary)
    if version is None:
        version = _default_version(name, tool_map, max_steps, provider_map)
    return AgentDefinition(
        name=name,
        version=version,
        description=description,
        instructions=instructions,
        model=model,
        tools=tool_map,
        max_steps=max_steps,
        runtime_context=runtime_context,
        identity_schema=identity,
        client_data_schema=client_data,
        send_policy=send_policy,
        tool_configs=configs,
        lifecycle=composed,
        on_runtime_error=on_runtime_error,
        ui_data_schemas=dict(ui_data_schemas or {}),
        run_metadata=run_metadata,
        thread_metadata=thread_metadata,
        message_metadata=message_metadata,
        provider_tools=provider_map,
        thread_titles=titles,
        reasoning_summary=summaries,
    )
