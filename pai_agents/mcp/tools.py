"""An MCP server's tool as a PAI :class:`~pai_agents.tools.Tool`.

A listed tool carries its own JSON schema, not a pydantic model: :class:`MCPTool` shows the
model that schema, validates arguments against it (``jsonschema``, installed with the
``mcp`` extra) and keeps them as an :class:`MCPArguments` (a pydantic model that keeps
every key), so the engine handles it exactly like a local tool. Nothing here imports the
SDK: results are read by shape.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from pai_agents.json import JsonValue
from pai_agents.mcp.config import MCPServer
from pai_agents.tools import Tool, ToolError, ToolInputError

__all__ = ["MCPArguments", "MCPTool", "build_tool", "result_output"]

_MAX_ERRORS = 5


class MCPArguments(BaseModel):
    """A call's arguments, already checked against the server's schema; keeps every key."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True, kw_only=True)
class MCPTool(Tool):
    """A tool listed by an MCP server for one run (``ToolInfo.source == "mcp"``)."""

    server: str = ""
    # The name the server listed (the model may see it prefixed or with characters replaced).
    remote_name: str = ""
    remote_schema: dict[str, Any] = field(default_factory=dict, hash=False, repr=False)

    @property
    def input_schema(self) -> dict[str, Any]:
        return copy.deepcopy(self.remote_schema)

    def parse_input(self, raw: Any) -> BaseModel:
        """Check arguments against the server's JSON schema: a mismatch is a model-visible
        input error before anything is stored or sent, as for a local tool."""
        try:
            value = json.loads(raw or "{}") if isinstance(raw, str) else raw
        except json.JSONDecodeError as exc:
            raise ToolInputError(f"Invalid JSON arguments for tool {self.name}: {exc.msg}") from exc
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise ToolInputError(f"Invalid input for tool {self.name}: arguments must be an object")
        problems = schema_problems(self.remote_schema, value)
        if problems:
            raise ToolInputError(f"Invalid input for tool {self.name}: {'; '.join(problems)}")
        return MCPArguments.model_validate(value)


def schema_problems(schema: dict[str, Any], value: Any) -> list[str]:
    """What is wrong with ``value`` under ``schema`` (at most a few lines), else nothing."""
    from jsonschema.validators import validator_for

    validator_class = validator_for(schema)
    validator = validator_class(schema)
    problems = []
    for error in sorted(validator.iter_errors(value), key=lambda e: list(e.path)):
        where = ".".join(str(p) for p in error.path) or "(input)"
        problems.append(f"{where}: {error.message}")
        if len(problems) == _MAX_ERRORS:
            break
    return problems


def check_schema(schema: Any) -> dict[str, Any]:
    """A listed input schema, or a minimal object schema for a server that sent none; a
    schema that is not a valid JSON schema raises ``ValueError``."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not schema:
        return {"type": "object", "properties": {}}
    if not isinstance(schema, dict):
        raise ValueError("input schema is not an object")
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"input schema is invalid: {exc.message}") from exc
    return copy.deepcopy(schema)


Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


def build_tool(server: MCPServer, listed: Any, call: Call) -> MCPTool:
    """The PAI tool for one listed tool (``name``, ``description``, ``input_schema``), whose
    calls go through ``call(remote_name, arguments)`` (the run's session)."""
    remote = str(listed.name)

    async def execute(arguments: BaseModel) -> JsonValue:
        return result_output(remote, await call(remote, arguments.model_dump(mode="json")))

    return MCPTool(
        name=server.tool_name(remote),
        description=str(listed.description or ""),
        input_model=MCPArguments,
        execute=execute,
        needs_approval=server.approval_for(remote),
        idempotent=server.idempotent_for(remote),
        server=server.name,
        remote_name=remote,
        remote_schema=check_schema(listed.input_schema),
    )


def result_output(name: str, result: Any) -> JsonValue:
    """A ``CallToolResult`` as the call's output; ``isError`` raises :class:`ToolError`
    with the server's text, which the model sees verbatim (docs/mcp.md, Results)."""
    blocks = list(getattr(result, "content", None) or [])
    texts = [str(b.text) for b in blocks if getattr(b, "type", None) == "text"]
    if getattr(result, "is_error", False):
        raise ToolError("\n\n".join(texts) or f"MCP tool {name} reported an error.")
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        return structured
    if len(texts) == len(blocks):
        return "\n\n".join(texts)
    return [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in blocks]
