"""The client projection of one stored message: reserved ``data-pai-*`` parts never leave.

Every path that hands a stored message to a client (HTTP pages, snapshots, realtime events,
their fallbacks) goes through :func:`client_message`, so a new reserved part type is
projected everywhere by adding it here once (MF-011).
"""

from __future__ import annotations

from typing import Any

from pai_agents.messages.file_refs import project_file_refs
from pai_agents.messages.reasoning_summary import project_reasoning_summaries
from pai_agents.messages.suspension_parts import project_suspensions
from pai_agents.messages.tool_data import project_tool_data

__all__ = ["client_message"]


def client_message(message: dict[str, Any]) -> dict[str, Any]:
    """ToolData and streamed suspension records joined onto tool parts (MF-012, MF-019,
    MF-023), file references as attachment parts (MF-014), reasoning summaries as
    ``summary`` on their reasoning parts (MF-013).

    It serves stored messages and messages a client folded from a stream alike, so the two
    project to the same PaiMessage; applied twice it changes nothing."""
    message = project_suspensions(project_tool_data(message))
    return project_reasoning_summaries(project_file_refs(message))
