"""Settings of the server the websocket command tests start: the integration test settings
(:mod:`tests.support.settings`) plus the ``commander`` agent and its capability binding."""

from __future__ import annotations

from tests.support.settings import *  # noqa: F403
from tests.support.settings import PAI

PAI = {
    **PAI,
    "AGENTS": [*PAI["AGENTS"], "tests.support.command_agents.commander"],
    "CAPABILITIES": {"clock": "tests.support.command_agents.office_clock"},
}
