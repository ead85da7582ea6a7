"""System checks of the MCP servers of every agent the site serves (docs/mcp.md, "Checks").

A run connects to its servers only when it starts; these checks catch, at start-up, what
would make a connection fail for sure: a stdio command that is not there, an HTTP URL
without a host. They never connect, start a process or call an ``env`` / ``headers``
callable, so ``manage.py check`` stays fast and offline.

Not checked here: a missing ``mcp`` SDK. ``define_agent`` raises for it when the agent's
module imports, which ``check_agents`` reports as ``pai.E001`` with the install hint.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Warning, register

from pai_agents.agent import AgentDefinition
from pai_agents.mcp import MCPServer
from pai_threads.execution import registry

__all__ = ["MCP_HINTS", "check_mcp_servers", "mcp_server_problem"]

# What to do about each finding, by id (the table is in docs/reference/settings.md).
MCP_HINTS: dict[str, str] = {
    "pai.W012": (
        "Install the command where this process and the workers run (or give its absolute "
        "path), or pass optional=True so runs go on without the server's tools."
    ),
    "pai.W013": (
        'MCPServer.http("name", url="https://mcp.example.com/mcp"): a scheme, a host, a path.'
    ),
}


def _search_path(server: MCPServer) -> str | None:
    """The PATH the server's process looks its command up in: a static ``env``'s PATH (the
    SDK adds ``env`` to its default environment), else this process's."""
    if isinstance(server.env, Mapping) and isinstance(server.env.get("PATH"), str):
        return str(server.env["PATH"])
    return os.environ.get("PATH")


def _command_problem(server: MCPServer) -> str | None:
    if server.cwd is not None and not os.path.isdir(server.cwd):
        return f"its cwd {server.cwd!r} is not a directory"
    command = server.command
    if os.sep in command or (os.altsep and os.altsep in command):
        # A path is not looked up on PATH; a relative one starts from the server's cwd.
        path = os.path.join(server.cwd or os.getcwd(), command)
        if not os.path.exists(path):
            return f"command {command!r} does not exist"
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            return f"command {command!r} is not an executable file"
        return None
    if shutil.which(command, path=_search_path(server)) is None:
        return f"command {command!r} is not found on PATH"
    return None


def _url_problem(server: MCPServer) -> str | None:
    try:
        parts = urlsplit(server.url)
        parts.port  # noqa: B018  (raises for a port that is not a number in range)
    except ValueError as exc:
        return f"url {server.url!r} is not a valid URL ({exc})"
    if not parts.hostname:
        return f"url {server.url!r} has no host"
    return None


def mcp_server_problem(server: MCPServer) -> str | None:
    """Why ``server`` cannot work from this machine, as far as one can tell offline, or None.

    ``define_agent`` has already validated the shape (names, transport, ``http(s)://``)."""
    if server.transport == "stdio":
        return _command_problem(server)
    return _url_problem(server)


def _servers(agents: Mapping[str, AgentDefinition]) -> Iterator[tuple[str, MCPServer]]:
    for agent in agents.values():
        for server in agent.mcp_servers:
            yield agent.name, server


@register("pai")
def check_mcp_servers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Each MCP server of each served agent (sub-agents included) can be started or reached."""
    if not isinstance(getattr(settings, "PAI", {}), dict):
        return []  # reported once as pai.E015
    try:
        agents = registry.agents()
    except Exception:
        return []  # reported by check_agents (pai.E001 / pai.E005 / pai.E006)
    messages: list[CheckMessage] = []
    for agent_name, server in _servers(agents):
        problem = mcp_server_problem(server)
        if problem is None:
            continue
        check_id = "pai.W012" if server.transport == "stdio" else "pai.W013"
        outcome = (
            "it is optional: runs go on without its tools"
            if server.optional
            else "runs of the agent will fail when they start"
        )
        text = f"agent {agent_name!r}, MCP server {server.name!r}: {problem}; {outcome}"
        messages.append(Warning(text, hint=MCP_HINTS[check_id], id=check_id))
    return messages
