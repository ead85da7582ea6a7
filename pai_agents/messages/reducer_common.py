"""What the chunk reducer's modules share: JavaScript ``undefined``, the stream error, steps.

JavaScript ``undefined`` is modelled as an absent key: the SDK writes ``part.x = undefined``
and ``JSON.stringify`` drops it, so a value of :data:`MISSING` removes the key. ``null`` stays
``None``.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from pai_agents.messages.types import UIMessage, UIMessageChunk, UIMessagePart

__all__ = [
    "MISSING",
    "UIMessageStreamError",
    "chunk_value",
    "clone",
    "current_step_parts",
    "present",
    "set_or_drop",
    "step_start_index",
]

MISSING: Final = object()
"""JavaScript ``undefined``: a field that is absent (and is dropped when written)."""


class UIMessageStreamError(ValueError):
    """A chunk refers to a part the stream never opened (the SDK's ``AI_UIMessageStreamError``)."""

    def __init__(self, message: str, *, chunk_type: str, chunk_id: str) -> None:
        super().__init__(message)
        self.chunk_type = chunk_type
        self.chunk_id = chunk_id


def set_or_drop(target: dict[str, Any], key: str, value: Any) -> None:
    """``target[key] = value``, where :data:`MISSING` removes the key (``= undefined``)."""
    if value is MISSING:
        target.pop(key, None)
    else:
        target[key] = value


def clone(value: Any) -> Any:
    """Deep-copy a value taken from a chunk or part so the two never share containers."""
    return value if value is MISSING else copy.deepcopy(value)


def chunk_value(chunk: UIMessageChunk, key: str) -> Any:
    """A copy of ``chunk[key]``; :data:`MISSING` when absent (``None`` stays ``None``)."""
    return clone(chunk.get(key, MISSING))


def present(chunk: UIMessageChunk, key: str) -> Any:
    """A field the SDK reads with ``!= null``/``??``: absent and ``None`` both mean missing."""
    value = chunk.get(key)
    return MISSING if value is None else copy.deepcopy(value)


def step_start_index(message: UIMessage) -> int:
    """The index of the last ``step-start`` part, -1 when the message has none."""
    parts = message["parts"]
    for index in range(len(parts) - 1, -1, -1):
        if parts[index].get("type") == "step-start":
            return index
    return -1


def current_step_parts(message: UIMessage) -> list[UIMessagePart]:
    """The parts after the last ``step-start`` (a copy of the list, the parts themselves)."""
    return message["parts"][step_start_index(message) + 1 :]
