"""The agents this site serves, loaded from ``PAI["AGENTS"]`` dotted paths."""

from __future__ import annotations

from functools import cache

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from pai_agents.agent import AgentDefinition
from pai_agents.subagents import SubagentTool
from pai_threads.conf import pai_settings

__all__ = ["AgentNotFound", "agents", "clear_cache", "default_agent_name", "get_agent"]


class AgentNotFound(LookupError):
    pass


@cache
def agents() -> dict[str, AgentDefinition]:
    loaded: dict[str, AgentDefinition] = {}
    for path in pai_settings.AGENTS:
        agent = import_string(path) if isinstance(path, str) else path
        if not isinstance(agent, AgentDefinition):
            raise ImproperlyConfigured(f"PAI['AGENTS'] entry {path!r} is not an AgentDefinition")
        if agent.name in loaded:
            raise ImproperlyConfigured(f"PAI['AGENTS'] defines agent {agent.name!r} twice")
        loaded[agent.name] = agent
    _add_subagents(loaded)
    return loaded


def _add_subagents(loaded: dict[str, AgentDefinition]) -> None:
    """Agents passed to ``subagent(...)`` as definitions are served too (children of
    children included), unless a registered agent of that name comes first."""
    pending = list(loaded.values())
    while pending:
        for tool in pending.pop().tools.values():
            child = tool.agent if isinstance(tool, SubagentTool) else None
            if isinstance(child, AgentDefinition) and child.name not in loaded:
                loaded[child.name] = child
                pending.append(child)


def get_agent(name: str) -> AgentDefinition:
    try:
        return agents()[name]
    except KeyError:
        raise AgentNotFound(name) from None


def default_agent_name() -> str:
    names = list(agents())
    if not names:
        raise ImproperlyConfigured("PAI['AGENTS'] is empty: register at least one agent")
    return names[0]


def clear_cache() -> None:
    agents.cache_clear()


pai_settings.on_reload(clear_cache)
