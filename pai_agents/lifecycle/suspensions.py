"""Suspension episodes: what a tool call waited for, as tool hooks see it (LC-132, LC-133).

A tool call that needs a person (approval) or a client (a tool without ``execute``) suspends
durably as a pending action. Each such episode is kept, so when the call resumes the hooks
can tell what was asked, what came back and when, without reading the store themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = ["SuspensionEpisode", "SuspensionKind", "SuspensionStatus"]

SuspensionKind: TypeAlias = Literal["approval", "client"]
SuspensionStatus: TypeAlias = Literal["pending", "submitted", "executing", "cancelled"]


@dataclass(frozen=True, kw_only=True)
class SuspensionEpisode:
    """One durable suspension of a tool call (one pending-action row).

    ``payload`` is what the person or client was shown (the call's input); ``resolution``
    is the answer submitted (``{"approved": ..., "reason"?}`` or ``{"output"}`` /
    ``{"errorText"}``), None while pending or when cancelled. Times are ISO 8601 UTC.
    """

    action_id: str
    kind: SuspensionKind
    status: SuspensionStatus
    payload: Any
    resolution: Any = None
    approval_id: str | None = None
    suspended_at: str | None = None
    resolved_at: str | None = None
