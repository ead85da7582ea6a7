"""Suspension episodes: what a tool call waited for, as tool hooks see it (LC-132, LC-133).

A tool call that needs a person (approval), a client (a tool without ``execute``) or a
person's typed answer (a declared suspension, kind ``input``: docs/suspensions.md) suspends
durably as a pending action; one call may suspend several times. Each such episode is
kept, so when the call resumes the hooks can tell what was asked, what came back and when,
without reading the store themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = ["SuspensionEpisode", "SuspensionKind", "SuspensionStatus"]

SuspensionKind: TypeAlias = Literal["approval", "client", "input", "subagent"]
SuspensionStatus: TypeAlias = Literal["pending", "submitted", "executing", "cancelled"]


@dataclass(frozen=True, kw_only=True)
class SuspensionEpisode:
    """One durable suspension of a tool call (one pending-action row).

    ``payload`` is what the person or client was shown (the call's input; for an input
    suspension the payload the tool gave ``ctx.suspend``); ``resolution`` is the answer
    submitted (``{"approved": ..., "reason"?}``, ``{"output"}`` / ``{"errorText"}``, or
    ``{"answer"}``), None while pending or when cancelled. ``name`` is the suspension's name
    (the kind itself for approvals and client tools); ``answer_schema`` the JSON schema of an
    input suspension's answer. Times are ISO 8601 UTC.
    """

    action_id: str
    kind: SuspensionKind
    status: SuspensionStatus
    payload: Any
    resolution: Any = None
    approval_id: str | None = None
    suspended_at: str | None = None
    resolved_at: str | None = None
    name: str = ""
    answer_schema: Any = None

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.kind)
