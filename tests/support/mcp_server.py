"""A small MCP server the MCP tests start as a real subprocess (stdio or streamable HTTP).

    python -m tests.support.mcp_server stdio
    python -m tests.support.mcp_server http --port 8123

``PAI_MCP_STATE_DIR`` (required) is where it keeps what the tests read and steer:
``calls.log`` (one JSON line per call, written when the call starts, so a call cut off by a
killed worker is still counted), ``release-<tag>`` (the ``slow`` tool blocks until it
exists), ``started-<tag>`` (written by ``slow`` once it is running) and ``with-multiply``
(while it exists, ``tools/list`` includes ``multiply``: the tool-list change a next run
must see; read on every list, so one long-running HTTP server changes too).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import Tool as MCPTool

__all__ = ["build_server", "main"]


def _state() -> Path:
    return Path(os.environ["PAI_MCP_STATE_DIR"])


def _record(tool: str, arguments: dict[str, Any]) -> None:
    with (_state() / "calls.log").open("a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")
        log.flush()
        os.fsync(log.fileno())


class _Server(MCPServer[Any]):
    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        if (_state() / "with-multiply").exists():
            return tools
        return [t for t in tools if t.name != "multiply"]


def build_server() -> MCPServer[Any]:
    server = _Server("pai-test-mcp", log_level="WARNING")

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        _record("echo", {"text": text})
        return f"echo: {text}"

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        _record("add", {"a": a, "b": b})
        return a + b

    @server.tool(description="Multiply two integers (listed only while with-multiply exists).")
    def multiply(a: int, b: int) -> int:
        _record("multiply", {"a": a, "b": b})
        return a * b

    @server.tool(description="Always fails with the given message.")
    def fail(message: str) -> str:
        _record("fail", {"message": message})
        raise ToolError(message)

    @server.tool(description="The X-Pai-User header the request carried (HTTP only).")
    def whoami(ctx: Context[Any, Any]) -> str:
        request = ctx.request_context.request
        headers = getattr(request, "headers", None) or {}
        return str(headers.get("x-pai-user", "nobody"))

    @server.tool(description="The server process exits mid-call.")
    def die() -> str:
        _record("die", {})
        os._exit(3)

    @server.tool(description="Block until the test releases this tag.")
    async def slow(tag: str) -> str:
        _record("slow", {"tag": tag})
        (_state() / f"started-{tag}").write_text("1")
        while not (_state() / f"release-{tag}").exists():
            await asyncio.sleep(0.05)
        return f"released {tag}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = build_server()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
