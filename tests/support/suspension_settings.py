"""Settings of the worker processes of tests/integration/test_tool_suspensions_workers.py:
the durable-run test settings plus the ``collector`` agent (a tool with declared
suspensions, tests.support.suspension_agents)."""

from __future__ import annotations

from typing import Any

from tests.support.durable_settings import *  # noqa: F403
from tests.support.durable_settings import PAI as DURABLE_PAI

COLLECTOR = "tests.support.suspension_agents.collector"

_pai: dict[str, Any] = {**DURABLE_PAI, "AGENTS": [*DURABLE_PAI["AGENTS"], COLLECTOR]}
PAI = _pai
