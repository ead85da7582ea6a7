"""Settings of the worker processes of tests/integration/test_subagents_workers.py: the
durable-run test settings plus the sub-agent test agents (tests.support.subagent_agents;
the ``searcher`` is served through the planner's definition)."""

from __future__ import annotations

from typing import Any

from tests.support.durable_settings import *  # noqa: F403
from tests.support.durable_settings import PAI as DURABLE_PAI

PLANNER = "tests.support.subagent_agents.planner"

_pai: dict[str, Any] = {**DURABLE_PAI, "AGENTS": [*DURABLE_PAI["AGENTS"], PLANNER]}
PAI = _pai
