"""Reasoning summaries on the wire and in storage: the reserved ``data-pai-reasoning-summary``
part (AD-051, MF-013).

A summary generated for a closed reasoning part travels as a native AI SDK data chunk in the
step message's own chunk sequence, so every reducer folds it like any other data chunk (its
part ``id`` is the reasoning ordinal, so a summary written again replaces its value in
place). Stored, it lives in the step message as a reserved part; clients never see the raw
part (MF-011): :func:`project_reasoning_summaries` sets it as ``summary`` on the reasoning
part it belongs to, the ``reasoning_ordinal``-th (zero-based) reasoning part of the message.
Model requests drop it like every data part without a converter.
"""

from __future__ import annotations

from typing import Any, Final

from pai_agents.messages.types import UIMessageChunk, UIMessagePart

__all__ = [
    "REASONING_SUMMARY_PART",
    "project_reasoning_summaries",
    "reasoning_summary_chunk",
]

REASONING_SUMMARY_PART: Final = "data-pai-reasoning-summary"


def reasoning_summary_chunk(reasoning_ordinal: int, summary: str) -> UIMessageChunk:
    """The chunk that stores ``summary`` for the message's ``reasoning_ordinal``-th reasoning
    part."""
    return {
        "type": REASONING_SUMMARY_PART,
        "id": str(reasoning_ordinal),
        "data": {"reasoningOrdinal": reasoning_ordinal, "summary": summary},
    }


def project_reasoning_summaries(message: dict[str, Any]) -> dict[str, Any]:
    """The client projection of a stored message's reasoning summaries (MF-013).

    Reserved ``data-pai-reasoning-summary`` parts are removed and each summary becomes
    ``summary`` on its reasoning part; a summary whose ordinal names no reasoning part is
    dropped. A message without summaries is returned as is.
    """
    parts = message.get("parts") or []
    if not any(part.get("type") == REASONING_SUMMARY_PART for part in parts):
        return message
    summaries: dict[int, str] = {}
    for part in parts:
        data = part.get("data") if part.get("type") == REASONING_SUMMARY_PART else None
        if isinstance(data, dict):
            ordinal, summary = data.get("reasoningOrdinal"), data.get("summary")
            if isinstance(ordinal, int) and isinstance(summary, str) and summary:
                summaries[ordinal] = summary
    projected: list[UIMessagePart] = []
    ordinal = 0
    for part in parts:
        kind = part.get("type")
        if kind == REASONING_SUMMARY_PART:
            continue
        if kind == "reasoning":
            if ordinal in summaries:
                part = {**part, "summary": summaries[ordinal]}
            ordinal += 1
        projected.append(part)
    return {**message, "parts": projected}
