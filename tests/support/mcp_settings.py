"""Settings of the Celery workers of the MCP crash test: the durable-run settings (3 s
leases) plus the agents of :mod:`tests.support.mcp_agents`."""

from __future__ import annotations

from typing import Any

from tests.support.durable_settings import *  # noqa: F403
from tests.support.durable_settings import PAI as DURABLE_PAI

MCP_AGENTS = ["tests.support.mcp_agents.mcp_http", "tests.support.mcp_agents.mcp_stdio"]

_pai: dict[str, Any] = {**DURABLE_PAI, "AGENTS": [*DURABLE_PAI["AGENTS"], *MCP_AGENTS]}
PAI = _pai
