"""Suspension records on the wire: the reserved ``data-pai-suspension`` part.

A stored tool part's ``suspensions`` and ``pendingSuspension`` (MF-023) are joined from the
pending-action rows when a message is read; no model chunk carries them. So that a client
folding a stream with the AI SDK's own reducer gets the same tool part as a reader of the
stored message, the transports send them, once the step's message is stored, as one native
data chunk per suspended call (``id`` = the toolCallId, so a later state of the same call
replaces the earlier one in place). Like ToolData, the raw part never reaches a PaiMessage
(MF-011): :func:`project_suspensions` joins it onto its tool part, which is what
:func:`pai_agents.messages.projection.client_message` applies to stored and to folded
messages alike.
"""

from __future__ import annotations

from typing import Any, Final

from pai_agents.messages.types import UIMessageChunk

__all__ = [
    "SUSPENSION_PART",
    "invalid_suspension",
    "project_suspensions",
    "suspension_chunks",
]

SUSPENSION_PART: Final = "data-pai-suspension"
_FIELDS: Final = ("suspensions", "pendingSuspension")


def _is_tool_part(part: dict[str, Any]) -> bool:
    kind = part.get("type", "")
    return isinstance(kind, str) and (kind == "dynamic-tool" or kind.startswith("tool-"))


def suspension_chunks(message: dict[str, Any]) -> list[UIMessageChunk]:
    """The ``data-pai-suspension`` chunks of a projected message's suspended tool parts."""
    chunks: list[UIMessageChunk] = []
    for part in message.get("parts") or []:
        if _is_tool_part(part) and "suspensions" in part:
            call_id = str(part["toolCallId"])
            data = {"toolCallId": call_id, **{k: part.get(k) for k in _FIELDS}}
            chunks.append({"type": SUSPENSION_PART, "id": call_id, "data": data})
    return chunks


def invalid_suspension(chunk: UIMessageChunk) -> str | None:
    """What is wrong with a ``data-pai-suspension`` chunk beyond the SDK schema."""
    data = chunk.get("data")
    if not isinstance(data, dict) or set(data) != {"toolCallId", *_FIELDS}:
        return "data has toolCallId, suspensions and pendingSuspension only"
    if not isinstance(data["toolCallId"], str) or chunk.get("id") != data["toolCallId"]:
        return "id must be data.toolCallId"
    if not isinstance(data["suspensions"], list):
        return "data.suspensions must be a list"
    if data["pendingSuspension"] is not None and not isinstance(data["pendingSuspension"], dict):
        return "data.pendingSuspension must be an object or null"
    return None


def project_suspensions(message: dict[str, Any]) -> dict[str, Any]:
    """Reserved suspension parts joined onto their tool parts and removed (a message
    without them is returned as is)."""
    parts = message.get("parts") or []
    records = {
        str(part["data"].get("toolCallId")): part["data"]
        for part in parts
        if part.get("type") == SUSPENSION_PART and isinstance(part.get("data"), dict)
    }
    if not records:
        return message
    projected = []
    for part in parts:
        if part.get("type") == SUSPENSION_PART:
            continue
        record = records.get(str(part.get("toolCallId"))) if _is_tool_part(part) else None
        if record is not None:
            part = {**part, **{k: record.get(k) for k in _FIELDS}}
        projected.append(part)
    return {**message, "parts": projected}
