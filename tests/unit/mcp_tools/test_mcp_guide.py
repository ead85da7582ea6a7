"""The configuration example of docs/mcp.md, executed from the page: it defines an agent,
and each option means what the page's table says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django.test import override_settings

from pai_agents import ScriptedModel
from pai_agents.mcp import MCPServer

PAGE = Path(__file__).resolve().parents[3] / "docs" / "mcp.md"


def _example() -> dict[str, Any]:
    [code] = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)[:1]
    # The page elides the model and the local tools; everything else runs as written.
    code = code.replace("model=...", "model=ScriptedModel()").replace("tools=[...]", "tools=[]")
    namespace: dict[str, Any] = {"ScriptedModel": ScriptedModel}
    exec(compile(code, str(PAGE), "exec"), namespace)
    return namespace


def test_the_guides_example_defines_an_agent_with_two_servers() -> None:
    example = _example()
    support, files, tickets = example["support"], example["files"], example["tickets"]
    assert [s.name for s in support.mcp_servers] == ["files", "tickets"]
    assert support.manifest()["mcpServers"] == ["files", "tickets"]
    assert isinstance(files, MCPServer) and files.transport == "stdio"
    assert not files.keeps("write_file") and files.keeps("read_file")
    assert files.idempotent_for("read_file") and not files.idempotent_for("move_file")
    assert tickets.tool_name("close_ticket") == "tickets_close_ticket"
    assert tickets.approval_for("close_ticket") and not tickets.approval_for("list_tickets")
    assert tickets.call_timeout == 30 and not tickets.optional
    with override_settings(TICKETS_TOKEN="t0ken"):
        assert tickets.headers(None) == {"Authorization": "Bearer t0ken"}  # type: ignore[misc, operator]
