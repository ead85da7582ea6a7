"""Tools from MCP servers (docs/mcp.md): configured per agent, listed per run episode.

The configuration and the tool types import without the SDK; connecting needs the ``mcp``
extra (the official ``mcp`` SDK), which :func:`define_agent` checks.
"""

from pai_agents.mcp.config import MCPError, MCPServer, MCPServerUnavailable, MCPToolConflict
from pai_agents.mcp.tools import MCPArguments, MCPTool

__all__ = [
    "MCPArguments",
    "MCPError",
    "MCPServer",
    "MCPServerUnavailable",
    "MCPTool",
    "MCPToolConflict",
]
