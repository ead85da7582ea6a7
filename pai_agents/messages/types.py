"""The AI SDK UIMessage grammar (ai@7) as typed dicts.

Messages and chunks stay plain dicts with the SDK's own camelCase keys: they are stored as
JSON and sent to browsers unchanged, so a second Python-shaped model would only add copies.
See ../shared/PROTOCOL.md (sections 1-3) for every field.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

__all__ = [
    "FinishReason",
    "MessageRole",
    "ToolState",
    "UIMessage",
    "UIMessageChunk",
    "UIMessagePart",
]

MessageRole: TypeAlias = Literal["system", "user", "assistant"]
ToolState: TypeAlias = Literal[
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
]
FinishReason: TypeAlias = Literal[
    "stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"
]

# A part is a dict whose "type" discriminates it: "text", "reasoning", "step-start",
# "tool-<name>", "dynamic-tool", "source-url", "source-document", "file", "data-<name>", ...
UIMessagePart: TypeAlias = dict[str, Any]

# A chunk is a dict whose "type" is one of PROTOCOL.md section 3.
UIMessageChunk: TypeAlias = dict[str, Any]


class UIMessage(TypedDict):
    id: str
    role: MessageRole
    metadata: NotRequired[Any]
    parts: list[UIMessagePart]
