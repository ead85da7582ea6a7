"""The server-side definition of an agent (:class:`AgentDefinition`).

A definition is a frozen value: it creates no storage, routes or workers. Build one with
:func:`~pai_agents.define.define_agent` (checked there); the Django layer registers
definitions by dotted path (``PAI["AGENTS"]``) and runs them through the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import BaseModel, ValidationError

from pai_agents._callables import call_user
from pai_agents.behavior import (
    AgentBehaviorInput,
    AgentDefinitionError,
    InstructionsValue,
    InvalidAgentInput,
    instructions_split,
    instructions_value,
)
from pai_agents.capabilities import Capability
from pai_agents.contract import AgentContract, build_contract
from pai_agents.lifecycle.compose import ComposedLifecycle
from pai_agents.lifecycle.metadata import AgentMetadataSchemas, MetadataSchemas
from pai_agents.mcp.config import MCPServer
from pai_agents.models.base import LanguageModel, ModelMessage, ModelSelection, ProviderTool
from pai_agents.tools import Tool

if TYPE_CHECKING:
    from pai_agents.commands import Command
    from pai_agents.reasoning_summary import ReasoningSummary
    from pai_agents.titles import ThreadTitles

__all__ = [
    "AgentBehaviorInput",
    "AgentDefinition",
    "AgentDefinitionError",
    "Instructions",
    "InstructionsValue",
    "InvalidAgentInput",
    "ModelSource",
    "RuntimeContextBuilder",
    "SendPolicy",
    "ToolConfig",
    "ToolOutputInput",
    "instructions_split",
    "instructions_value",
]


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
    # Retries of a model step after a transient provider fault; None: the engine's default
    # (PAI["MODEL_MAX_RETRIES"]). A prepare_run patch's max_retries overrides it (TH-019).
    max_retries: int | None = None
    # Tool calls executed per model step (the rest get an error result); None: the engine's
    # default (PAI["MAX_TOOL_CALLS_PER_STEP"]).
    max_tool_calls_per_step: int | None = None
    # Commands by name (docs/commands.md): the full registry, server-only ones included; the
    # manifest lists only the exposed ones (AD-075).
    commands: Mapping[str, Command] = field(default_factory=dict)
    # What the tools and commands need the project to bind, by capability id (AD-062); a
    # runtime for the agent requires a binding for each (AD-063). Folded by define_agent.
    capabilities: Mapping[str, Capability] = field(default_factory=dict)
    # MCP servers whose tools join each run episode (docs/mcp.md); listed at the episode's
    # start, so ``tools`` holds only the agent's own.
    mcp_servers: tuple[MCPServer, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def metadata_schemas(self) -> AgentMetadataSchemas:
        """The three schema pairs, as the stores and facades take them."""
        return AgentMetadataSchemas(
            run=self.run_metadata, thread=self.thread_metadata, message=self.message_metadata
        )

    @cached_property
    def contract(self) -> AgentContract:
        """The full registered contract (AD-074, AD-077): JSON Schemas of every payload,
        server-only commands and private metadata shapes included; for trusted server code.
        ``contract.public()`` is what clients get. Built on first use, then kept (the
        definition is frozen, so it cannot go stale)."""
        return build_contract(self)

    def manifest(self) -> dict[str, Any]:
        """A JSON-serializable description: name, version, the tools the model may see and
        the commands clients may call.

        Provider tools are listed by name only: a definition may carry credentials (an MCP
        server's headers, say), which the manifest must never hold (AD-076). Commands are
        keyed by name, client-exposed ones only, without schemas (AD-075, AD-076). MCP
        servers are listed by name only: their tools are known per run, their headers and
        environment are secrets.
        """
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "maxSteps": self.max_steps,
            "tools": [t.manifest() for t in self.tools.values()],
            "providerTools": list(self.provider_tools),
            "mcpServers": [server.name for server in self.mcp_servers],
            "threadTitles": self.thread_titles is not None,
            "reasoningSummary": self.reasoning_summary is not None,
            "commands": {k: c.manifest() for k, c in self.commands.items() if c.exposed},
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


def _validate(
    schema: type[BaseModel] | None, value: Mapping[str, Any], what: str
) -> dict[str, Any]:
    if schema is None:
        return dict(value)
    try:
        return schema.model_validate(dict(value)).model_dump(mode="json")
    except ValidationError as exc:
        raise InvalidAgentInput(f"{what} does not match the agent's schema: {exc}") from exc
