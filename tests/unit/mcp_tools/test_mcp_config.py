"""MCP server configuration and the tools a listed MCP tool becomes (no server needed)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pai_agents import ScriptedModel, ToolError, define_agent
from pai_agents.behavior import AgentDefinitionError
from pai_agents.mcp import MCPServer, MCPTool
from pai_agents.mcp.tools import build_tool, result_output
from pai_agents.tools import ToolInputError

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


def _listed(name: str = "add", schema: Any = SCHEMA, description: str = "Add.") -> Any:
    return SimpleNamespace(name=name, description=description, input_schema=schema)


async def _never(name: str, arguments: dict[str, Any]) -> Any:
    raise AssertionError("not called")


def _tool(server: MCPServer | None = None, **listed: Any) -> MCPTool:
    server = server or MCPServer.http("calc", url="http://127.0.0.1:1/mcp")
    return build_tool(server, _listed(**listed), _never)


def test_stdio_and_http_servers_are_checked_when_defined() -> None:
    with pytest.raises(ValueError, match="needs a command"):
        MCPServer.stdio("x", command="")
    with pytest.raises(ValueError, match="http:// or https://"):
        MCPServer.http("x", url="ftp://example.com")
    with pytest.raises(ValueError, match="letters, digits"):
        MCPServer.http("has space", url="http://example.com")
    with pytest.raises(TypeError, match="unknown MCP server option"):
        MCPServer.http("x", url="http://example.com", needs_aproval=True)
    with pytest.raises(TypeError, match="set of tool names"):
        MCPServer.http("x", url="http://example.com", allow="add")
    with pytest.raises(ValueError, match="positive"):
        MCPServer.http("x", url="http://example.com", call_timeout=0)
    with pytest.raises(TypeError, match="mapping or a callable"):
        MCPServer.http("x", url="http://example.com", headers="Bearer x")


def test_per_server_options_select_tools_by_their_listed_names() -> None:
    server = MCPServer.http(
        "calc",
        url="http://example.com/mcp",
        prefix="calc_",
        allow=["add", "sub", "drop"],
        deny={"drop"},
        needs_approval={"sub"},
        idempotent=True,
    )
    assert [server.keeps(n) for n in ("add", "sub", "drop", "mul")] == [True, True, False, False]
    assert server.tool_name("files/read.v2") == "calc_files_read_v2"
    assert server.approval_for("sub") and not server.approval_for("add")
    assert server.idempotent_for("anything")


def test_define_agent_rejects_bad_mcp_servers() -> None:
    server = MCPServer.http("calc", url="http://example.com/mcp")
    model = ScriptedModel()
    with pytest.raises(AgentDefinitionError, match="two MCP servers named 'calc'"):
        define_agent("a", instructions="x", model=model, mcp_servers=[server, server])
    with pytest.raises(AgentDefinitionError, match="expected an MCPServer"):
        define_agent("a", instructions="x", model=model, mcp_servers=[{"url": "http://x"}])
    with pytest.raises(AgentDefinitionError, match="list of MCPServer"):
        define_agent("a", instructions="x", model=model, mcp_servers=server)  # type: ignore[arg-type]


def test_the_manifest_lists_servers_by_name_never_their_headers() -> None:
    """AD-076: a definition may carry credentials (an MCP server's headers); the manifest
    never holds them."""
    server = MCPServer.http(
        "tickets", url="https://mcp.example.com/mcp", headers={"Authorization": "Bearer s3cret"}
    )
    agent = define_agent("a", instructions="x", model=ScriptedModel(), mcp_servers=[server])
    manifest = agent.manifest()
    assert manifest["mcpServers"] == ["tickets"]
    assert "s3cret" not in str(manifest) and "s3cret" not in repr(server)


def test_a_listed_tool_keeps_its_own_schema_and_options() -> None:
    server = MCPServer.http(
        "calc", url="http://x.test/mcp", prefix="c_", needs_approval={"add"}, idempotent={"add"}
    )
    tool = _tool(server, name="add")
    assert isinstance(tool, MCPTool)
    assert (tool.name, tool.remote_name, tool.server) == ("c_add", "add", "calc")
    assert tool.spec() == {"name": "c_add", "inputSchema": SCHEMA, "description": "Add."}
    assert tool.needs_approval and tool.idempotent
    spec = tool.spec()
    spec["inputSchema"]["properties"].clear()  # a copy: the tool's schema is unchanged
    assert tool.input_schema == SCHEMA


def test_arguments_are_checked_against_the_servers_schema() -> None:
    tool = _tool()
    parsed = tool.parse_input('{"a": 1, "b": 2, "extra": [1]}')
    assert parsed.model_dump(mode="json") == {"a": 1, "b": 2, "extra": [1]}
    with pytest.raises(ToolInputError, match=r"Invalid input for tool add: .*'b' is a required"):
        tool.parse_input({"a": 1})
    with pytest.raises(ToolInputError, match="a: 'x' is not of type 'integer'"):
        tool.parse_input({"a": "x", "b": 1})
    with pytest.raises(ToolInputError, match="Invalid JSON arguments"):
        tool.parse_input("{nope")
    with pytest.raises(ToolInputError, match="must be an object"):
        tool.parse_input("[1]")


def test_a_tool_without_a_schema_takes_an_object_and_a_broken_schema_is_refused() -> None:
    assert _tool(schema=None).input_schema == {"type": "object", "properties": {}}
    with pytest.raises(ValueError, match="input schema is invalid"):
        _tool(schema={"type": "no-such-type"})


def _result(*blocks: Any, structured: Any = None, is_error: bool = False) -> Any:
    return SimpleNamespace(content=list(blocks), structured_content=structured, is_error=is_error)


class _Block:
    def __init__(self, **fields: Any) -> None:
        self.fields = fields
        self.type = fields["type"]
        self.text = fields.get("text")

    def model_dump(self, **options: Any) -> dict[str, Any]:
        return dict(self.fields)


def _text(text: str) -> Any:
    return _Block(type="text", text=text)


def test_results_map_to_outputs_and_model_visible_errors() -> None:
    """docs/mcp.md, Results and errors."""
    image = _Block(type="image", data="AAAA", mimeType="image/png")
    assert result_output("t", _result(_text("5"), structured={"result": 5})) == {"result": 5}
    assert result_output("t", _result(_text("one"))) == "one"
    assert result_output("t", _result(_text("one"), _text("two"))) == "one\n\ntwo"
    assert result_output("t", _result(_text("see"), image)) == [
        {"type": "text", "text": "see"},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
    ]
    with pytest.raises(ToolError, match=r"^no such file$"):
        result_output("t", _result(_text("no such file"), is_error=True))
    with pytest.raises(ToolError, match="MCP tool t reported an error"):
        result_output("t", _result(is_error=True))


def test_the_default_version_fingerprints_the_servers_but_not_their_secrets() -> None:
    """AD-002: the fingerprint covers the declared surface, MCP servers included; headers
    and env are secrets, not surface."""
    model = ScriptedModel()

    def version(*servers: MCPServer) -> str:
        return define_agent("a", instructions="x", model=model, mcp_servers=servers).version

    plain = define_agent("a", instructions="x", model=model).version
    calc = MCPServer.http("calc", url="http://x.test/mcp", headers={"Authorization": "one"})
    rotated = MCPServer.http("calc", url="http://x.test/mcp", headers={"Authorization": "two"})
    approving = MCPServer.http("calc", url="http://x.test/mcp", needs_approval={"add"})
    assert version() == plain
    assert version(calc) != plain
    assert version(calc) == version(rotated)
    assert version(approving) != version(calc)
