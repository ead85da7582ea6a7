"""Which registered tools a step offers: a tool config's ``enabled`` (AD-055, AD-056)."""

from __future__ import annotations

from pai_agents._callables import call_user
from pai_agents.engine.run_state import RunState

__all__ = ["enabled_tools", "is_enabled"]


async def is_enabled(state: RunState, name: str) -> bool:
    config = state.agent.tool_configs.get(name)
    if config is None or config.enabled is True:
        return True
    if config.enabled is False:
        return False
    return bool(await call_user(config.enabled, state.behavior))


async def enabled_tools(state: RunState) -> list[str]:
    """Registered tools whose ``enabled`` holds for this step, in registration order."""
    if not state.agent.tool_configs:
        return list(state.agent.tools)
    return [name for name in state.agent.tools if await is_enabled(state, name)]
