"""The checks :func:`~pai_agents.define.define_agent` runs, one per argument.

Each raises :class:`~pai_agents.behavior.AgentDefinitionError` naming the agent and the
argument, at definition time, so a malformed agent never reaches a run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, TypeAdapter

from pai_agents.agent import Instructions, ModelSource, ToolConfig
from pai_agents.behavior import AgentDefinitionError, instructions_value
from pai_agents.json import NotStrictJson
from pai_agents.lifecycle.compose import ComposedLifecycle, compose_lifecycle
from pai_agents.lifecycle.metadata import MetadataSchemaError, MetadataSchemas
from pai_agents.lifecycle.stop import stop_when as stop_when_part
from pai_agents.mcp.client import sdk_missing
from pai_agents.mcp.config import MCPServer
from pai_agents.models.base import LanguageModel, ModelSelection, ProviderTool
from pai_agents.tools import Tool

__all__ = [
    "NAME",
    "check_basics",
    "check_instructions",
    "check_limits",
    "check_metadata_schemas",
    "check_model",
    "check_schemas",
    "check_ui_data_schemas",
    "composed_lifecycle",
    "default_version",
    "mcp_server_tuple",
    "provider_tool_map",
    "tool_maps",
]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def check_basics(name: str, send_policy: str, max_steps: int, version: str | None) -> None:
    if not NAME.match(name):
        raise AgentDefinitionError(f"agent name {name!r} must match {NAME.pattern}")
    if send_policy not in ("queue", "reject", "interrupt", "steer"):
        raise AgentDefinitionError(f"agent {name!r}: unknown send_policy {send_policy!r}")
    if max_steps < 1:
        raise AgentDefinitionError(f"agent {name!r}: max_steps must be at least 1")
    if version is not None and (not isinstance(version, str) or not version):
        raise AgentDefinitionError(f"agent {name!r}: version must be a non-empty string")


def check_limits(name: str, *, max_retries: Any, max_tool_calls_per_step: Any) -> None:
    """Retry and tool-call bounds: None (the engine's default) or a non-negative integer
    (at least 1 for the tool-call bound)."""
    for what, value, least in (
        ("max_retries", max_retries, 0),
        ("max_tool_calls_per_step", max_tool_calls_per_step, 1),
    ):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise AgentDefinitionError(
                f"agent {name!r}: {what} must be an integer of at least {least}, not {value!r}"
            )


def check_schemas(name: str, **schemas: Any) -> None:
    """AD-005: identity and client data are pydantic model classes."""
    for what, schema in schemas.items():
        if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise AgentDefinitionError(f"agent {name!r}: {what} must be a pydantic model class")


def check_ui_data_schemas(name: str, ui_data_schemas: Mapping[str, Any] | None) -> None:
    """Names outside the reserved ``pai-`` prefix; pydantic models or TypeAdapters (their
    payloads need not be objects, so values are checked when written)."""
    for key, schema in (ui_data_schemas or {}).items():
        if not isinstance(key, str) or not key or key.startswith("pai-"):
            raise AgentDefinitionError(
                f"agent {name!r}: ui_data_schemas key {key!r} must be a non-empty name "
                "outside the reserved 'pai-' prefix"
            )
        if not (
            isinstance(schema, TypeAdapter)
            or (isinstance(schema, type) and issubclass(schema, BaseModel))
        ):
            raise AgentDefinitionError(
                f"agent {name!r}: ui_data_schemas[{key!r}] must be a pydantic model or TypeAdapter"
            )


def check_instructions(name: str, instructions: Instructions) -> None:
    """AD-024: static instructions are checked now; a builder's value on every step."""
    if not callable(instructions):
        instructions_value(instructions, agent=name)


def check_model(name: str, model: ModelSource) -> None:
    if not (callable(model) or isinstance(model, ModelSelection | LanguageModel)):
        raise AgentDefinitionError(
            f"agent {name!r}: model must be a LanguageModel, ModelSelection or resolver"
        )


def tool_maps(
    name: str, tools: Iterable[Tool | ToolConfig] | Mapping[str, Tool | ToolConfig]
) -> tuple[dict[str, Tool], dict[str, ToolConfig]]:
    """``(tools by name, per-registration configs by name)``; keys are the tools' names."""
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
    return tool_map, configs


def composed_lifecycle(
    name: str, lifecycle: Any, stop_when: Sequence[Callable[..., Any]]
) -> ComposedLifecycle | None:
    """The lifecycle composed once (``stop_when`` conditions last); None when empty."""
    composed: ComposedLifecycle | None = None
    if isinstance(lifecycle, ComposedLifecycle) and not stop_when:
        composed = lifecycle  # kept as given (its name and trace)
    elif lifecycle is not None or stop_when:
        parts = list(lifecycle) if isinstance(lifecycle, list | tuple) else [lifecycle]
        if stop_when:
            parts.append(stop_when_part(*stop_when))
        try:
            composed = compose_lifecycle(*parts)
        except TypeError as exc:
            raise AgentDefinitionError(f"agent {name!r}: {exc}") from exc
    if composed is not None and not composed.parts:
        return None
    return composed


def check_metadata_schemas(name: str, **pairs: MetadataSchemas | None) -> None:
    """AD-028..AD-030, re-checked on the very object registered."""
    for what, pair in pairs.items():
        if pair is None:
            continue
        if not isinstance(pair, MetadataSchemas):
            raise AgentDefinitionError(
                f"agent {name!r}: {what} must be MetadataSchemas(private=..., public=...)"
            )
        try:
            pair.initial()
        except MetadataSchemaError as exc:
            raise AgentDefinitionError(f"agent {name!r}: {what}: {exc}") from exc


def provider_tool_map(
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
        if not isinstance(key, str) or not NAME.match(key):
            raise AgentDefinitionError(
                f"agent {agent!r}: provider tool name {key!r} must match {NAME.pattern}"
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


def default_version(
    name: str,
    tools: Mapping[str, Tool],
    max_steps: int,
    provider_tools: Mapping[str, ProviderTool],
    commands: Mapping[str, Any] | None = None,
    *,
    mcp_servers: Sequence[MCPServer] = (),
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
    if commands:  # likewise: a command's shape is part of the surface
        surface["commands"] = {
            key: {
                **item.manifest(),
                "exposed": item.exposed,
                "inputSchema": item.input_model.model_json_schema(),
            }
            for key, item in sorted(commands.items())
        }
    if mcp_servers:  # where the tools come from and their options; never headers or env
        surface["mcpServers"] = [_mcp_surface(server) for server in mcp_servers]
    digest = hashlib.sha256(json.dumps(surface, sort_keys=True, default=str).encode())
    return f"pai-{digest.hexdigest()[:12]}"


def mcp_server_tuple(name: str, servers: Iterable[MCPServer]) -> tuple[MCPServer, ...]:
    """``mcp_servers``: MCPServer values with distinct names, and the SDK installed."""
    if isinstance(servers, MCPServer | str | Mapping):
        raise AgentDefinitionError(f"agent {name!r}: mcp_servers must be a list of MCPServer")
    result = tuple(servers)
    seen: set[str] = set()
    for server in result:
        if not isinstance(server, MCPServer):
            raise AgentDefinitionError(
                f"agent {name!r}: mcp_servers holds {type(server).__name__}, expected an "
                "MCPServer (MCPServer.stdio(...) or MCPServer.http(...))"
            )
        if server.name in seen:
            raise AgentDefinitionError(f"agent {name!r}: two MCP servers named {server.name!r}")
        seen.add(server.name)
    missing = sdk_missing() if result else None
    if missing:
        raise AgentDefinitionError(f"agent {name!r}: {missing}")
    return result


def _mcp_surface(server: MCPServer) -> dict[str, Any]:
    return {
        "name": server.name,
        "transport": server.transport,
        "command": [server.command, *server.args],
        "url": server.url,
        "prefix": server.prefix,
        "allow": sorted(server.allow) if server.allow is not None else None,
        "deny": sorted(server.deny),
        "needsApproval": _selection(server.needs_approval),
        "idempotent": _selection(server.idempotent),
    }


def _selection(value: bool | frozenset[str]) -> bool | list[str]:
    return value if isinstance(value, bool) else sorted(value)
