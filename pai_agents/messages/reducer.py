"""A Python port of the AI SDK's ``processUIMessageStream`` (ai@7): folds chunks into a message.

The server folds the chunks it publishes with the same rules the browser applies (MF-027), so
the stored message equals what ``readUIMessageStream``/``useChat`` rebuild. Every quirk of the
SDK is kept on purpose, including the ones PROTOCOL.md advises emitters to avoid.

JavaScript ``undefined`` is modelled as an absent key (see
:mod:`~pai_agents.messages.reducer_common`); the tool-part state machine is
:mod:`~pai_agents.messages.tool_parts`, text, reasoning, data and the other parts are here.
The reducer does not validate chunk shapes; run
:func:`~pai_agents.messages.chunks.validate_chunk` first on untrusted input (the SDK's
transports do the same).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, Final

from pai_agents.messages.partial_json import parse_partial_json
from pai_agents.messages.reducer_common import (
    UIMessageStreamError,
    chunk_value,
    present,
    set_or_drop,
    step_start_index,
)
from pai_agents.messages.tool_parts import TOOL_CHUNK_TYPES, ToolParts
from pai_agents.messages.types import UIMessage, UIMessageChunk, UIMessagePart

__all__ = [
    "MessageReducer",
    "UIMessageStreamError",
    "merge_metadata",
    "parse_partial_json",
    "reduce_chunks",
]

_UNSAFE_KEYS: Final = frozenset({"__proto__", "constructor", "prototype"})


def merge_metadata(old: Any, new: Any) -> Any:
    """Merge message metadata like the SDK's ``mergeObjects`` (PROTOCOL.md section 4.2).

    Plain objects merge key by key, recursively; arrays, primitives and ``None`` replace.
    A ``None``/missing ``old`` is replaced by ``new`` outright.
    """
    if old is None:
        return copy.deepcopy(new)
    if not isinstance(old, dict) or not isinstance(new, dict):
        return copy.deepcopy(new)
    result = dict(old)
    for key, value in new.items():
        if key in _UNSAFE_KEYS:
            continue
        base = result.get(key)
        if isinstance(value, dict) and isinstance(base, dict):
            result[key] = merge_metadata(base, value)
        else:
            result[key] = copy.deepcopy(value)
    return result


# --- the reducer --------------------------------------------------------------------------


def _empty_message(message_id: str = "") -> UIMessage:
    return {"id": message_id, "role": "assistant", "parts": []}


class MessageReducer:
    """Folds UIMessageChunks into one assistant message, exactly like the SDK's reducer.

    ``apply`` returns True when the SDK would have called ``write()`` for the chunk, that is
    when a browser would see a new snapshot (PROTOCOL.md section 4.9).
    """

    def __init__(self, message: UIMessage | None = None) -> None:
        if message is not None and message.get("role") == "assistant":
            self._message: UIMessage = copy.deepcopy(message)
        else:
            self._message = _empty_message()
        self._active_text: dict[str, UIMessagePart] = {}
        self._active_reasoning: dict[str, UIMessagePart] = {}
        self._finish_reason: str | None = None
        self.errors: list[str] = []
        self._tools = ToolParts(self._message)

    @property
    def message(self) -> UIMessage:
        return self._message

    @property
    def finish_reason(self) -> str | None:
        return self._finish_reason

    def snapshot(self) -> UIMessage:
        return copy.deepcopy(self._message)

    def _reset(self, message_id: str) -> None:
        self._message = _empty_message(message_id)
        self._active_text.clear()
        self._active_reasoning.clear()
        self._tools = ToolParts(self._message)
        self._finish_reason = None

    # -- text and reasoning --------------------------------------------------------------

    def _open(self, chunk: UIMessageChunk, kind: str, registry: dict[str, UIMessagePart]) -> None:
        part: UIMessagePart = {"type": kind}
        if kind == "reasoning":
            part["id"] = chunk["id"]
        part["text"] = ""
        set_or_drop(part, "providerMetadata", present(chunk, "providerMetadata"))
        part["state"] = "streaming"
        registry[str(chunk["id"])] = part
        self._message["parts"].append(part)

    def _active(
        self, chunk: UIMessageChunk, kind: str, registry: dict[str, UIMessagePart]
    ) -> UIMessagePart:
        part = registry.get(str(chunk["id"]))
        if part is None:
            chunk_type = str(chunk["type"])
            raise UIMessageStreamError(
                f'Received {chunk_type} for missing {kind} part with ID "{chunk["id"]}". '
                f'Ensure a "{kind}-start" chunk is sent before any "{chunk_type}" chunks.',
                chunk_type=chunk_type,
                chunk_id=str(chunk["id"]),
            )
        if chunk.get("providerMetadata") is not None:
            part["providerMetadata"] = chunk_value(chunk, "providerMetadata")
        return part

    def _delta(self, chunk: UIMessageChunk, kind: str, registry: dict[str, UIMessagePart]) -> None:
        part = self._active(chunk, kind, registry)
        part["text"] += chunk["delta"]

    def _end(self, chunk: UIMessageChunk, kind: str, registry: dict[str, UIMessagePart]) -> None:
        part = self._active(chunk, kind, registry)
        part["state"] = "done"
        if kind == "text" and chunk.get("citations") is not None:
            part["citations"] = chunk_value(chunk, "citations")
        del registry[str(chunk["id"])]

    # -- everything else ----------------------------------------------------------------

    def _merge_metadata(self, value: Any) -> bool:
        if value is None:
            return False
        self._message["metadata"] = merge_metadata(self._message.get("metadata"), value)
        return True

    def _append_fields(self, chunk: UIMessageChunk, fields: tuple[str, ...]) -> None:
        part: UIMessagePart = {"type": chunk["type"]}
        for key in fields:
            set_or_drop(part, key, chunk_value(chunk, key))
        self._message["parts"].append(part)

    def _data(self, chunk: UIMessageChunk) -> bool:
        if chunk.get("transient") is True:
            return False
        if chunk.get("id") is not None:
            for part in self._message["parts"]:
                if part.get("type") == chunk["type"] and part.get("id") == chunk["id"]:
                    part["data"] = chunk_value(chunk, "data")
                    return True
        self._message["parts"].append(copy.deepcopy(chunk))
        return True

    def _reset_step(self) -> bool:
        self._active_text.clear()
        self._active_reasoning.clear()
        self._tools.partial_calls.clear()
        start = step_start_index(self._message) + 1
        removed = len(self._message["parts"]) > start
        del self._message["parts"][start:]
        return removed

    def apply(self, chunk: UIMessageChunk) -> bool:
        """Apply one chunk; True when the SDK would emit a snapshot for it."""
        kind = chunk.get("type")
        if kind == "text-delta":  # most chunks of a stream: tested first
            self._delta(chunk, "text", self._active_text)
            return True
        kind = str(kind)
        if kind == "start":
            message_id = chunk.get("messageId")
            if message_id is not None and message_id != self._message["id"]:
                # readUIMessageStream starts a fresh message when the id changes.
                self._reset(str(message_id))
            merged = self._merge_metadata(chunk.get("messageMetadata"))
            return message_id is not None or merged
        if kind == "message-metadata":
            return self._merge_metadata(chunk.get("messageMetadata"))
        if kind == "finish":
            if chunk.get("finishReason") is not None:
                self._finish_reason = str(chunk["finishReason"])
            return self._merge_metadata(chunk.get("messageMetadata"))
        if kind == "error":
            self.errors.append(str(chunk.get("errorText", "")))
            return False
        if kind in ("abort", "finish-step"):
            return False
        if kind == "start-step":
            self._message["parts"].append({"type": "step-start"})
            return False
        if kind == "reset-step":
            return self._reset_step()
        if kind.startswith("data-"):
            return self._data(chunk)
        if kind in TOOL_CHUNK_TYPES:
            self._tools.apply(chunk)
            return True
        handler = self._HANDLERS.get(kind)
        if handler is None:
            return False  # the SDK ignores chunk types it does not know
        handler(self, chunk)
        return True

    _HANDLERS: Final[dict[str, Any]] = {
        "text-start": lambda self, c: self._open(c, "text", self._active_text),
        "text-delta": lambda self, c: self._delta(c, "text", self._active_text),
        "text-end": lambda self, c: self._end(c, "text", self._active_text),
        "reasoning-start": lambda self, c: self._open(c, "reasoning", self._active_reasoning),
        "reasoning-delta": lambda self, c: self._delta(c, "reasoning", self._active_reasoning),
        "reasoning-end": lambda self, c: self._end(c, "reasoning", self._active_reasoning),
        "source-url": lambda self, c: self._append_fields(
            c, ("sourceId", "url", "title", "providerMetadata")
        ),
        "source-document": lambda self, c: self._append_fields(
            c, ("sourceId", "mediaType", "title", "filename", "providerMetadata")
        ),
        "file": lambda self, c: self._append_fields(c, ("mediaType", "url", "providerMetadata")),
        "reasoning-file": lambda self, c: self._append_fields(
            c, ("mediaType", "url", "providerMetadata")
        ),
        "custom": lambda self, c: self._append_fields(c, ("kind", "providerMetadata")),
        "steering-message": lambda self, c: self._append_fields(c, ("id", "parts")),
    }


def reduce_chunks(chunks: Iterable[UIMessageChunk], message: UIMessage | None = None) -> UIMessage:
    """Fold a whole chunk stream into its final message (a fresh copy)."""
    reducer = MessageReducer(message)
    for chunk in chunks:
        reducer.apply(chunk)
    return reducer.message
