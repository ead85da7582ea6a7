"""The agent contract: the runtime value behind the seed's type-level ``AgentContract``.

In TypeScript the contract is inferred from the agent's Zod schemas at compile time; a
Python server has no such type to hand a client, so :class:`AgentContract` carries JSON
Schemas instead (generate client types from them with json-schema-to-typescript,
datamodel-code-generator, ...). ``definition.contract`` is the **full registered** contract
(server-only commands, private metadata shapes, capability ids): for trusted server code.
:meth:`AgentContract.public` is the client contract (AD-077): server-only commands removed,
private run, thread and message metadata erased to a generic JSON object, no capability
ids. Neither holds callables, provider tool definitions or MCP server settings (headers,
environment, URLs may carry credentials): MCP tools are listed per run episode, so the
contract names the servers only.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeAlias

from pydantic import BaseModel, TypeAdapter

from pai_agents.capabilities import Capability
from pai_agents.commands import Command
from pai_agents.lifecycle.metadata import MetadataSchemas
from pai_agents.mcp.config import MCPServer
from pai_agents.models.base import ProviderTool
from pai_agents.subagents import SubagentTool
from pai_agents.suspensions import answer_schema
from pai_agents.tools import Tool

__all__ = [
    "AgentContract",
    "CommandContract",
    "ContractSource",
    "MetadataContract",
    "ToolContract",
    "ToolSource",
    "build_contract",
]

JsonSchema: TypeAlias = dict[str, Any]
# Where a tool runs: the vocabulary of the lifecycle's ToolInfo.source (LC-132), plus
# "provider" for provider-defined tools (AD-071). "mcp" never appears: MCP tools are
# listed per run episode, not declared on the definition.
ToolSource: TypeAlias = Literal["backend", "client", "subagent", "provider"]


def _json_object() -> JsonSchema:
    """The generic JSON object schema: what an undeclared or erased shape becomes."""
    return {"type": "object"}


def _schema(schema: Any, mode: Literal["validation", "serialization"]) -> JsonSchema:
    """A pydantic model's or TypeAdapter's JSON Schema. ``validation``: what a caller
    sends (inputs); ``serialization``: what a reader receives (parsed, stored values)."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema(mode=mode)
    if isinstance(schema, TypeAdapter):
        return schema.json_schema(mode=mode)
    raise TypeError(f"not a pydantic model or TypeAdapter: {schema!r}")


@dataclass(frozen=True, kw_only=True)
class MetadataContract:
    """The ``{private, public}`` shapes of run, thread or message metadata, as the stored
    (parsed) bags look. An undeclared pair is two generic JSON objects."""

    private: JsonSchema = field(default_factory=_json_object)
    public: JsonSchema = field(default_factory=_json_object)

    @classmethod
    def of(cls, pair: MetadataSchemas | None) -> MetadataContract:
        if pair is None:
            return cls()
        return cls(
            private=_schema(pair.private, "serialization"),
            public=_schema(pair.public, "serialization"),
        )

    def erased(self) -> MetadataContract:
        """The client view: the private shape replaced by a generic JSON object (AD-077)."""
        return MetadataContract(private=_json_object(), public=copy.deepcopy(self.public))

    def as_dict(self) -> dict[str, Any]:
        return {"private": copy.deepcopy(self.private), "public": copy.deepcopy(self.public)}


@dataclass(frozen=True, kw_only=True)
class ToolContract:
    """One tool by registration name: what the model is told and what its parts carry.

    ``suspends`` maps each declared suspension to the JSON Schema of its answer;
    ``agent`` is a sub-agent tool's child agent."""

    name: str
    description: str
    source: ToolSource
    input_schema: JsonSchema
    output_schema: JsonSchema | None = None
    needs_approval: bool = False
    idempotent: bool = False
    suspends: Mapping[str, JsonSchema] = field(default_factory=dict)
    agent: str | None = None

    @classmethod
    def of(cls, tool: Tool) -> ToolContract:
        source: ToolSource = (
            "subagent"
            if isinstance(tool, SubagentTool)
            else "client"
            if tool.execute is None
            else "backend"
        )
        return cls(
            name=tool.name,
            description=tool.description,
            source=source,
            input_schema=tool.input_schema,
            output_schema=(
                None if tool.output_model is None else _schema(tool.output_model, "serialization")
            ),
            needs_approval=tool.needs_approval,
            idempotent=tool.idempotent,
            suspends=MappingProxyType(
                {name: answer_schema(model) for name, model in tool.suspends.items()}
            ),
            agent=tool.agent_name if isinstance(tool, SubagentTool) else None,
        )

    @classmethod
    def of_provider(cls, name: str, tool: ProviderTool) -> ToolContract:
        """A provider-defined tool: its input schema (any value when it declares none);
        never its provider-native definition, which may hold credentials."""
        # ``{}``: JSON Schema's "any value", for a provider tool declaring no input schema.
        schema = {} if tool.input_schema is None else _schema(tool.input_schema, "validation")
        return cls(name=name, description="", source="provider", input_schema=schema)

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "inputSchema": copy.deepcopy(self.input_schema),
            "needsApproval": self.needs_approval,
            "idempotent": self.idempotent,
        }
        if self.output_schema is not None:
            entry["outputSchema"] = copy.deepcopy(self.output_schema)
        if self.suspends:
            entry["suspends"] = copy.deepcopy(dict(self.suspends))
        if self.agent is not None:
            entry["agent"] = self.agent
        return entry


@dataclass(frozen=True, kw_only=True)
class CommandContract:
    """One command by name. ``exposed``: ordinary clients may call it (otherwise it is
    server-only, and absent from the public contract); ``metadata_aware``: it is bound to
    the agent's run metadata pair (AD-036)."""

    name: str
    description: str
    exposed: bool
    starts_run: bool
    input_schema: JsonSchema
    output_schema: JsonSchema | None = None
    metadata_aware: bool = False

    @classmethod
    def of(cls, item: Command) -> CommandContract:
        return cls(
            name=item.name,
            description=item.description,
            exposed=item.exposed,
            starts_run=item.starts_run,
            input_schema=_schema(item.input_model, "validation"),
            output_schema=(
                None if item.output_model is None else _schema(item.output_model, "serialization")
            ),
            metadata_aware=item.run_metadata is not None,
        )

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "exposed": self.exposed,
            "startsRun": self.starts_run,
            "metadataAware": self.metadata_aware,
            "inputSchema": copy.deepcopy(self.input_schema),
        }
        if self.output_schema is not None:
            entry["outputSchema"] = copy.deepcopy(self.output_schema)
        return entry


@dataclass(frozen=True, kw_only=True)
class AgentContract:
    """An agent's payload shapes as JSON Schemas (the seed's ``AgentContract``).

    ``identity`` is the trusted caller as validated (serialization mode), ``client_data``
    what a client sends (validation mode); an agent without such a schema takes any JSON
    object. ``public`` tells the two projections apart: False for ``definition.contract``,
    True for :meth:`public`'s result. Treat the schemas as read-only; :meth:`as_dict`
    hands out copies."""

    name: str
    version: str
    identity: JsonSchema
    client_data: JsonSchema
    run_metadata: MetadataContract
    thread_metadata: MetadataContract
    message_metadata: MetadataContract
    ui_data: Mapping[str, JsonSchema]
    tools: Mapping[str, ToolContract]
    commands: Mapping[str, CommandContract]
    mcp_servers: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()
    public_view: bool = False

    def public(self) -> AgentContract:
        """The client contract (AD-077): server-only commands omitted, private run, thread
        and message metadata erased to ``{"type": "object"}``, capability ids (server
        wiring) dropped. Idempotent: the public view of a public view is itself."""
        if self.public_view:
            return self
        return replace(
            self,
            run_metadata=self.run_metadata.erased(),
            thread_metadata=self.thread_metadata.erased(),
            message_metadata=self.message_metadata.erased(),
            commands=MappingProxyType({k: c for k, c in self.commands.items() if c.exposed}),
            capabilities=(),
            public_view=True,
        )

    def as_dict(self) -> dict[str, Any]:
        """A fresh JSON-serializable dict (camelCase keys, like the manifest)."""
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "public": self.public_view,
            "identity": copy.deepcopy(self.identity),
            "clientData": copy.deepcopy(self.client_data),
            "runMetadata": self.run_metadata.as_dict(),
            "threadMetadata": self.thread_metadata.as_dict(),
            "messageMetadata": self.message_metadata.as_dict(),
            "uiData": copy.deepcopy(dict(self.ui_data)),
            "tools": {name: entry.as_dict() for name, entry in self.tools.items()},
            "commands": {name: entry.as_dict() for name, entry in self.commands.items()},
            "mcpServers": list(self.mcp_servers),
        }
        if not self.public_view:
            out["capabilities"] = list(self.capabilities)
        return out

    def to_json(self) -> dict[str, Any]:
        """Alias of :meth:`as_dict` (the value ``json.dumps`` takes)."""
        return self.as_dict()


class ContractSource(Protocol):
    """What a contract is built from: an ``AgentDefinition`` (named structurally, since
    the definition module imports this one)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def identity_schema(self) -> type[BaseModel] | None: ...
    @property
    def client_data_schema(self) -> type[BaseModel] | None: ...
    @property
    def run_metadata(self) -> MetadataSchemas | None: ...
    @property
    def thread_metadata(self) -> MetadataSchemas | None: ...
    @property
    def message_metadata(self) -> MetadataSchemas | None: ...
    @property
    def ui_data_schemas(self) -> Mapping[str, Any]: ...
    @property
    def tools(self) -> Mapping[str, Tool]: ...
    @property
    def provider_tools(self) -> Mapping[str, ProviderTool]: ...
    @property
    def commands(self) -> Mapping[str, Command]: ...
    @property
    def mcp_servers(self) -> tuple[MCPServer, ...]: ...
    @property
    def capabilities(self) -> Mapping[str, Capability]: ...


def build_contract(definition: ContractSource) -> AgentContract:
    """The full registered contract of ``definition`` (``definition.contract`` caches it)."""
    tools = {name: ToolContract.of(item) for name, item in definition.tools.items()}
    tools.update(
        (name, ToolContract.of_provider(name, item))
        for name, item in definition.provider_tools.items()
    )
    return AgentContract(
        name=definition.name,
        version=definition.version,
        identity=(
            _json_object()
            if definition.identity_schema is None
            else _schema(definition.identity_schema, "serialization")
        ),
        client_data=(
            _json_object()
            if definition.client_data_schema is None
            else _schema(definition.client_data_schema, "validation")
        ),
        run_metadata=MetadataContract.of(definition.run_metadata),
        thread_metadata=MetadataContract.of(definition.thread_metadata),
        message_metadata=MetadataContract.of(definition.message_metadata),
        ui_data=MappingProxyType(
            {key: _schema(s, "serialization") for key, s in definition.ui_data_schemas.items()}
        ),
        tools=MappingProxyType(tools),
        commands=MappingProxyType(
            {name: CommandContract.of(item) for name, item in definition.commands.items()}
        ),
        mcp_servers=tuple(server.name for server in definition.mcp_servers),
        capabilities=tuple(definition.capabilities),
    )
