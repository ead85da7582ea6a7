"""Agents of the MCP crash test (tests/integration/test_mcp_crash.py), loaded by real Celery
workers (tests.support.mcp_settings).

``mcp_http`` reaches the test MCP server at ``PAI_TEST_MCP_URL``; ``mcp_stdio`` starts it per
episode with ``PAI_MCP_STATE_DIR``. Both read the worker's environment at import. Their model
asks for ``slow`` with the user's text as the tag, then answers with the tool results it was
given (``Tool results: <json>``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pai_agents import (
    AgentDefinition,
    ModelRequest,
    ScriptedModel,
    ScriptedStep,
    ScriptedToolCall,
    define_agent,
)
from pai_agents.mcp import MCPServer
from tests.support.durable_agents import last_user_text, tool_results
from tests.support.mcp_fixtures import stdio_server

__all__ = ["mcp_http", "mcp_stdio"]


def _respond(request: ModelRequest) -> ScriptedStep:
    if request.messages and request.messages[-1]["role"] == "tool":
        return ScriptedStep(text=f"Tool results: {json.dumps(tool_results(request))}")
    tag = last_user_text(request).strip()
    return ScriptedStep(
        text="Calling the slow MCP tool.",
        tool_calls=[ScriptedToolCall(name="slow", input={"tag": tag})],
    )


def _agent(name: str, server: MCPServer) -> AgentDefinition:
    return define_agent(
        name,
        instructions="MCP crash test agent.",
        model=ScriptedModel(respond=_respond, record_requests=False),
        mcp_servers=[server],
    )


mcp_http = _agent(
    "mcp_http",
    MCPServer.http("remote", url=os.environ.get("PAI_TEST_MCP_URL", "http://127.0.0.1:9/mcp")),
)
mcp_stdio = _agent(
    "mcp_stdio", stdio_server(Path(os.environ.get("PAI_MCP_STATE_DIR", "/nonexistent")))
)
