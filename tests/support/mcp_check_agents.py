"""Agents of the MCP system-check tests (tests/integration/test_mcp_checks.py).

``mcp_checked`` holds one server per case; :data:`BROKEN` names those the checks must warn
about and :data:`FINE` those they must not. ``mcp_parent`` serves ``mcp_child`` only as a
sub-agent, whose broken server is still checked. No server is ever started or reached, and
the ``env`` / ``headers`` callables raise: the checks must not call them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pai_agents import ScriptedModel, ScriptedStep, define_agent, subagent
from pai_agents.behavior import AgentBehaviorInput
from pai_agents.mcp import MCPServer

__all__ = ["BROKEN", "FINE", "mcp_checked", "mcp_parent"]

MISSING = "pai-no-such-mcp-server"
PYTHON_DIR, PYTHON_NAME = os.path.split(sys.executable)


def _never(run: AgentBehaviorInput) -> Mapping[str, str]:
    raise AssertionError("a system check called an env/headers callable")


_SERVERS = [
    # Broken: pai.W012 (stdio) and pai.W013 (http).
    MCPServer.stdio("missing", command=MISSING),
    MCPServer.stdio("missing_optional", command="/nonexistent/bin/mcp-server", optional=True),
    MCPServer.stdio("not_executable", command=os.path.abspath(__file__)),
    MCPServer.stdio("own_path", command="sh", env={"PATH": "/nonexistent"}),
    MCPServer.stdio("no_cwd", command=sys.executable, cwd="/nonexistent-pai-dir"),
    MCPServer.http("hostless", url="http:///mcp"),
    MCPServer.http("bad_port", url="https://mcp.example.com:99999/mcp"),
    # Fine.
    MCPServer.stdio("python", command=sys.executable, args=["-c", "pass"], env=_never),
    MCPServer.stdio("relative", command=os.path.join(".", PYTHON_NAME), cwd=PYTHON_DIR),
    MCPServer.stdio("on_path", command=PYTHON_NAME, env={"PATH": PYTHON_DIR}),
    MCPServer.http("remote", url="https://mcp.example.com/mcp", headers=_never),
]

BROKEN = {
    "missing": ("pai.W012", f"command {MISSING!r} is not found on PATH"),
    "missing_optional": ("pai.W012", "command '/nonexistent/bin/mcp-server' does not exist"),
    "not_executable": ("pai.W012", "is not an executable file"),
    "own_path": ("pai.W012", "command 'sh' is not found on PATH"),
    "no_cwd": ("pai.W012", "its cwd '/nonexistent-pai-dir' is not a directory"),
    "hostless": ("pai.W013", "url 'http:///mcp' has no host"),
    "bad_port": ("pai.W013", "is not a valid URL"),
}
FINE = ("python", "relative", "on_path", "remote")


def _model() -> ScriptedModel:
    return ScriptedModel(steps=[ScriptedStep.reply("unused")])


mcp_checked = define_agent(
    "mcp_checked", instructions="MCP check test agent.", model=_model(), mcp_servers=_SERVERS
)
mcp_child = define_agent(
    "mcp_child",
    instructions="A sub-agent with an MCP server.",
    model=_model(),
    mcp_servers=[MCPServer.stdio("child_tools", command=MISSING)],
)
mcp_parent = define_agent(
    "mcp_parent",
    instructions="Delegates.",
    model=_model(),
    tools=[subagent(mcp_child, description="Ask the child.")],
)
