"""Suspension episodes joined onto their tool parts, for clients and tool hooks.

Each :class:`~pai_threads.models.PendingAction` row is one durable suspension episode of its
tool call. Clients get them joined onto the owning tool part as ``part.suspensions`` (every
episode) and ``part.pendingSuspension`` (the pending one, or null) (MF-012, MF-023). The join
is a projection: stored parts stay native (MF-017), and a page of messages costs one query.
Only parts of calls that suspended at least once get the two fields (absent means no
episode), so every other part round-trips exactly as stored (MF-009, MF-027).
Tool hooks get the same rows as :class:`SuspensionEpisode` values (LC-132, LC-133).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, MutableMapping
from datetime import datetime
from typing import Any, cast

from pai_agents.engine.store import ActionRequest
from pai_agents.lifecycle.suspensions import SuspensionEpisode
from pai_threads.models import PendingAction

__all__ = [
    "action_request",
    "episode_public",
    "join_suspensions",
    "suspend_history_of",
    "suspension_episode",
]

# Everything a client may see of an action; ``submitted_by`` (identity data) stays private.
_PUBLIC_COLUMNS = (
    "id",
    "message_id",
    "tool_call_id",
    "sequence",
    "kind",
    "status",
    "input",
    "request",
    "response",
    "created_at",
    "resolved_at",
)


def _iso(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with a Z, as the API's schemas write datetimes."""
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None


def action_request(action: ActionRequest) -> dict[str, Any]:
    """The ``request`` column of a new episode: the approval id of an approval, the
    suspension's name and answer schema of a declared (input) suspension."""
    request: dict[str, Any] = {}
    if action.approval_id:
        request["approvalId"] = action.approval_id
    if action.kind == "input":
        request["suspension"] = action.suspension
        request["schema"] = dict(action.answer_schema or {})
    return request


def suspension_episode(action: PendingAction) -> SuspensionEpisode:
    """The hook view of one episode (``suspend_history`` entries)."""
    request = action.request or {}
    return SuspensionEpisode(
        action_id=action.id,
        kind=cast(Any, action.kind),
        status=cast(Any, action.status),
        payload=action.input,
        resolution=action.response,
        approval_id=request.get("approvalId"),
        suspended_at=_iso(action.created_at),
        resolved_at=_iso(action.resolved_at),
        name=str(request.get("suspension") or action.kind),
        answer_schema=request.get("schema"),
    )


def episode_public(action: PendingAction) -> dict[str, Any]:
    """The client view of one episode: the hook view's fields, camelCase. An input episode
    also names its suspension and the answer's schema (the built-in kinds keep their
    shape: their kind is their name)."""
    episode = suspension_episode(action)
    public: dict[str, Any] = {
        "id": episode.action_id,
        "kind": episode.kind,
        "status": episode.status,
        "payload": episode.payload,
        "approvalId": episode.approval_id,
        "resolution": episode.resolution,
        "suspendedAt": episode.suspended_at,
        "resolvedAt": episode.resolved_at,
    }
    if episode.kind == "input":
        public["name"] = episode.name
        public["answerSchema"] = episode.answer_schema
    return public


def _is_tool(part: Mapping[str, Any]) -> bool:
    kind = str(part.get("type", ""))
    return kind == "dynamic-tool" or kind.startswith("tool-")


def join_suspensions(thread_id: str, messages: Iterable[MutableMapping[str, Any]]) -> None:
    """Give each tool part of ``messages`` (projected UIMessages of one thread) whose call
    has suspension episodes its ``suspensions`` and ``pendingSuspension``.

    A joined message gets a new ``parts`` list with new dicts for the joined parts, so the
    stored row's parts are never modified. One query for all messages; none without tool
    parts.
    """
    targets = [m for m in messages if any(_is_tool(p) for p in m.get("parts") or ())]
    if not targets:
        return
    episodes: dict[tuple[str, str], list[dict[str, Any]]] = {}
    rows = (
        PendingAction.objects.filter(
            thread_id=thread_id, message_id__in={str(m["id"]) for m in targets}
        )
        .only(*_PUBLIC_COLUMNS)
        .order_by("sequence", "created_at", "id")
    )
    for action in rows:
        episodes.setdefault((action.message_id, action.tool_call_id), []).append(
            episode_public(action)
        )
    suspended = {message_id for message_id, _ in episodes}
    for message in targets:
        message_id = str(message["id"])
        if message_id in suspended:
            message["parts"] = [_joined(part, message_id, episodes) for part in message["parts"]]


def _joined(
    part: Mapping[str, Any], message_id: str, episodes: Mapping[tuple[str, str], list[Any]]
) -> Mapping[str, Any]:
    found = episodes.get((message_id, str(part.get("toolCallId")))) if _is_tool(part) else None
    if not found:
        return part
    pending = next((e for e in reversed(found) if e["status"] == "pending"), None)
    return {**part, "suspensions": found, "pendingSuspension": pending}


def suspend_history_of(
    run_id: str, tool_call_ids: Collection[str]
) -> dict[str, list[SuspensionEpisode]]:
    """The suspension episodes of a run's calls, oldest first: one read, on resume only (the
    engine never asks on an initial dispatch)."""
    found: dict[str, list[SuspensionEpisode]] = {}
    rows = PendingAction.objects.filter(run_id=run_id, tool_call_id__in=list(tool_call_ids))
    for action in rows.order_by("sequence", "created_at", "id"):
        found.setdefault(action.tool_call_id, []).append(suspension_episode(action))
    return found
