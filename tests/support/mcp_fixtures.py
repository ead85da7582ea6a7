"""Starting the test MCP server (tests/support/mcp_server.py) for the MCP tests.

``stdio_server(state)`` is the configuration PAI starts per run episode; ``HttpMCPServer``
runs one real streamable-HTTP server subprocess on a free port for the whole test.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pai_agents.mcp import MCPServer

__all__ = ["HttpMCPServer", "calls", "free_port", "http_server", "release", "stdio_server"]

ROOT = Path(__file__).resolve().parents[2]


def stdio_server(state: Path, name: str = "local", **options: Any) -> MCPServer:
    return MCPServer.stdio(
        name,
        command=sys.executable,
        args=["-m", "tests.support.mcp_server", "stdio"],
        env={"PAI_MCP_STATE_DIR": str(state)},
        cwd=str(ROOT),
        **options,
    )


def http_server(url: str, name: str = "remote", **options: Any) -> MCPServer:
    return MCPServer.http(name, url=url, **options)


def calls(state: Path) -> list[dict[str, Any]]:
    """Every call the server started, in order."""
    log = state / "calls.log"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def release(state: Path, tag: str) -> None:
    (state / f"release-{tag}").write_text("1")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpMCPServer:
    """A real streamable-HTTP MCP server subprocess (``with HttpMCPServer(state) as url``)."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> str:
        env = {**os.environ, "PAI_MCP_STATE_DIR": str(self.state)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.mcp_server", "http", "--port", str(self.port)],
            cwd=ROOT,
            env=env,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("the MCP test server exited at start")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self.url
            time.sleep(0.05)
        raise RuntimeError("the MCP test server did not start")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
