"""ToolData on the wire and in storage: the reserved ``data-pai-tool-data`` part.

A record a tool writes while it runs travels as a native AI SDK data chunk, so the SDK's own
reducer folds it (MF-027): its part ``id`` encodes the identity (toolCallId, channel, id), so
a retained record written again replaces its value in place (MF-022), and ``transient: true``
chunks are never stored (MF-021). Stored, durable records live in the step message as
reserved parts; clients never see those raw parts (MF-011): :func:`project_tool_data` joins
them onto their tool part as ``part["data"][channel]``, a list in write order (MF-012,
MF-019).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from pai_agents.json import is_strict_json
from pai_agents.messages.types import UIMessageChunk, UIMessagePart

__all__ = [
    "TOOL_DATA_PART",
    "invalid_channel",
    "invalid_record_id",
    "invalid_tool_data",
    "project_tool_data",
    "record_key",
    "tool_data_chunk",
]

TOOL_DATA_PART: Final = "data-pai-tool-data"

# A channel is a key of ``part.data`` in every client: a name, never an object-prototype key.
_CHANNEL: Final = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_UNSAFE_CHANNELS: Final = frozenset({"constructor", "prototype"})
MAX_RECORD_ID: Final = 256


def invalid_channel(channel: object) -> str | None:
    """Why ``channel`` cannot name a ToolData channel, or None."""
    if (
        not isinstance(channel, str)
        or not _CHANNEL.fullmatch(channel)
        or channel in _UNSAFE_CHANNELS
    ):
        return (
            "a channel is a letter then up to 63 letters, digits, '_' or '-' "
            f"(not 'constructor' or 'prototype'), not {channel!r}"
        )
    return None


def invalid_record_id(record_id: object) -> str | None:
    if not isinstance(record_id, str) or not 0 < len(record_id) <= MAX_RECORD_ID:
        return f"a record id is a non-empty string of at most {MAX_RECORD_ID} characters"
    return None


def record_key(tool_call_id: str, channel: str, record_id: str) -> str:
    """The data part id of a record: unambiguous for any strings (a JSON array, written as
    the browser's ``JSON.stringify`` writes it)."""
    return json.dumps([tool_call_id, channel, record_id], separators=(",", ":"), ensure_ascii=False)


def tool_data_chunk(
    tool_call_id: str, channel: str, record_id: str, value: Any, *, transient: bool = False
) -> UIMessageChunk:
    """The chunk of one record; ``transient`` only when true (PROTOCOL.md section 9)."""
    chunk: UIMessageChunk = {
        "type": TOOL_DATA_PART,
        "id": record_key(tool_call_id, channel, record_id),
        "data": {"toolCallId": tool_call_id, "channel": channel, "id": record_id, "value": value},
    }
    if transient:
        chunk["transient"] = True
    return chunk


def invalid_tool_data(chunk: UIMessageChunk) -> str | None:
    """What is wrong with a ``data-pai-tool-data`` chunk or part beyond the SDK schema."""
    data = chunk.get("data")
    if not isinstance(data, dict):
        return "data must be an object"
    call_id, channel, record_id = data.get("toolCallId"), data.get("channel"), data.get("id")
    if not isinstance(call_id, str) or not call_id:
        return "data.toolCallId must be a non-empty string"
    problem = invalid_channel(channel) or invalid_record_id(record_id)
    if problem is not None:
        return f"data: {problem}"
    if "value" not in data or not is_strict_json(data["value"]):
        return "data.value must be strict JSON"
    if set(data) != {"toolCallId", "channel", "id", "value"}:
        return "data has toolCallId, channel, id and value only"
    if chunk.get("id") != record_key(call_id, str(channel), str(record_id)):
        return "id must be the record key of (toolCallId, channel, id)"
    return None


def _is_tool_part(part: UIMessagePart) -> bool:
    kind = part.get("type", "")
    return isinstance(kind, str) and (kind == "dynamic-tool" or kind.startswith("tool-"))


def project_tool_data(message: dict[str, Any]) -> dict[str, Any]:
    """The client projection of a stored message's ToolData (MF-011, MF-012, MF-019).

    Reserved ``data-pai-tool-data`` parts are removed; each tool part with records gets
    ``data = {channel: [{"id", "value"}, ...]}`` in write order (a replaced record keeps its
    first position). Tool parts without records are unchanged, and a message without records
    is returned as is. Records of a call the message does not hold are dropped.
    """
    parts = message.get("parts") or []
    if not any(part.get("type") == TOOL_DATA_PART for part in parts):
        return message
    by_call: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for part in parts:
        data = part.get("data") if part.get("type") == TOOL_DATA_PART else None
        if isinstance(data, dict) and isinstance(data.get("toolCallId"), str):
            channels = by_call.setdefault(data["toolCallId"], {})
            channels.setdefault(str(data.get("channel")), []).append(
                {"id": data.get("id"), "value": data.get("value")}
            )
    owners: dict[str, int] = {}  # call id -> index of its (last) tool part
    projected: list[UIMessagePart] = []
    for part in parts:
        if part.get("type") == TOOL_DATA_PART:
            continue
        if _is_tool_part(part) and part.get("toolCallId") in by_call:
            owners[str(part["toolCallId"])] = len(projected)
        projected.append(part)
    for call_id, index in owners.items():
        projected[index] = {**projected[index], "data": by_call[call_id]}
    return {**message, "parts": projected}
