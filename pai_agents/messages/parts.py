"""The persisted part grammar: which part types a stored UIMessage may hold (MF-045).

Storage keeps AI SDK parts unchanged (PROTOCOL.md section 2), so every storage boundary
checks the same list: the fixed part types, ``data-<name>``, and ``tool-<name>`` parts that
have the SDK's tool shape (``toolCallId`` and a known ``state``). The shape check is what
rejects the removed grammars whose names look like tool parts (``tool-invocation`` with a
nested ``toolInvocation``, ``tool-call`` with ``args``); ``pai-*`` parts are simply unknown.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, get_args

from pai_agents.messages.types import ToolState

__all__ = ["PART_TYPES", "UnknownPartType", "check_part_types"]

PART_TYPES: Final = frozenset(
    {
        "text",
        "reasoning",
        "custom",
        "dynamic-tool",
        "source-url",
        "source-document",
        "file",
        "reasoning-file",
        "steering-message",
        "step-start",
    }
)
_TOOL_STATES: Final = frozenset(get_args(ToolState))


class UnknownPartType(ValueError):
    """A part outside the pinned AI SDK grammar; nothing was stored."""


def check_part_types(parts: Iterable[Any], *, what: str = "message") -> None:
    """Raise :class:`UnknownPartType` for the first part a stored message may not hold."""
    for index, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str) or not _known(kind, part):
            raise UnknownPartType(f"{what} parts[{index}]: unknown part type {kind!r}")


def _known(kind: str, part: dict[str, Any]) -> bool:
    if kind in PART_TYPES:
        return True
    if kind.startswith("data-"):
        return len(kind) > len("data-")
    if kind.startswith("tool-") and len(kind) > len("tool-"):
        return isinstance(part.get("toolCallId"), str) and part.get("state") in _TOOL_STATES
    return False
