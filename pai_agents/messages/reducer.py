"""A Python port of the AI SDK's ``processUIMessageStream`` (ai@7): folds chunks into a message.

The server folds the chunks it publishes with the same rules the browser applies (MF-027), so
the stored message equals what ``readUIMessageStream``/``useChat`` rebuild. Every quirk of the
SDK is kept on purpose, including the ones PROTOCOL.md advises emitters to avoid.

JavaScript ``undefined`` is modelled as an absent key: the SDK writes ``part.x = undefined``
and ``JSON.stringify`` drops it, so here the key is removed. ``null`` stays ``None``.
The reducer does not validate chunk shapes; run :func:`~pai_agents.messages.chunks.validate_chunk`
first on untrusted input (the SDK's transports do the same).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, Final

from pai_agents.messages.partial_json import parse_partial_json
from pai_agents.messages.types import UIMessage, UIMessageChunk, UIMessagePart

__all__ = [
    "MessageReducer",
    "UIMessageStreamError",
    "merge_metadata",
    "parse_partial_json",
    "reduce_chunks",
]

_MISSING: Final = object()
_RESULT_STATES: Final = frozenset({"output-available", "output-error"})
_OVERWRITTEN: Final = ("input", "output", "errorText", "rawInput", "preliminary")
_UNSAFE_KEYS: Final = frozenset({"__proto__", "constructor", "prototype"})


class UIMessageStreamError(ValueError):
    """A chunk refers to a part the stream never opened (the SDK's ``AI_UIMessageStreamError``)."""

    def __init__(self, message: str, *, chunk_type: str, chunk_id: str) -> None:
        super().__init__(message)
        self.chunk_type = chunk_type
        self.chunk_id = chunk_id


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


def _is_tool_part(part: UIMessagePart) -> bool:
    kind = part.get("type", "")
    return isinstance(kind, str) and (kind == "dynamic-tool" or kind.startswith("tool-"))


def _tool_name(part: UIMessagePart) -> str:
    if part["type"] == "dynamic-tool":
        return str(part["toolName"])
    return str(part["type"])[len("tool-") :]


def _set_or_drop(target: dict[str, Any], key: str, value: Any) -> None:
    if value is _MISSING:
        target.pop(key, None)
    else:
        target[key] = value


def _clone(value: Any) -> Any:
    """Deep-copy a value taken from a chunk or part so the two never share containers."""
    return value if value is _MISSING else copy.deepcopy(value)


def _get(chunk: UIMessageChunk, key: str) -> Any:
    return _clone(chunk.get(key, _MISSING))


def _present(chunk: UIMessageChunk, key: str) -> Any:
    """A field the SDK reads with ``!= null``/``??``: absent and ``None`` both mean missing."""
    value = chunk.get(key)
    return _MISSING if value is None else copy.deepcopy(value)


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
        self._partial_calls: dict[str, dict[str, Any]] = {}
        self._finish_reason: str | None = None
        self.errors: list[str] = []
        self._rebuild_partial_calls()

    @property
    def message(self) -> UIMessage:
        return self._message

    @property
    def finish_reason(self) -> str | None:
        return self._finish_reason

    def snapshot(self) -> UIMessage:
        return copy.deepcopy(self._message)

    def _rebuild_partial_calls(self) -> None:
        # Resuming (section 5): only input-streaming tool calls of the last step can continue;
        # open text and reasoning parts are not re-registered, as in the SDK.
        for part in self._current_step_parts():
            if _is_tool_part(part) and part.get("state") == "input-streaming":
                raw = part.get("rawInput")
                self._partial_calls[str(part["toolCallId"])] = {
                    "text": raw if isinstance(raw, str) else "",
                    "toolName": _tool_name(part),
                    "dynamic": part["type"] == "dynamic-tool",
                    "inputEncoding": part.get("inputEncoding", _MISSING),
                    "title": part.get("title", _MISSING),
                    "toolMetadata": part.get("toolMetadata", _MISSING),
                }

    def _reset(self, message_id: str) -> None:
        self._message = _empty_message(message_id)
        self._active_text.clear()
        self._active_reasoning.clear()
        self._partial_calls.clear()
        self._finish_reason = None

    # -- lookups ------------------------------------------------------------------------

    def _step_start_index(self) -> int:
        parts = self._message["parts"]
        for index in range(len(parts) - 1, -1, -1):
            if parts[index].get("type") == "step-start":
                return index
        return -1

    def _current_step_parts(self) -> list[UIMessagePart]:
        return self._message["parts"][self._step_start_index() + 1 :]

    def _find_in_step(self, tool_call_id: str, *, dynamic: bool | None) -> UIMessagePart | None:
        """A tool part of the current step; ``dynamic=None`` accepts either kind."""
        for part in self._current_step_parts():
            if not _is_tool_part(part) or part.get("toolCallId") != tool_call_id:
                continue
            if dynamic is None or (part["type"] == "dynamic-tool") == dynamic:
                return part
        return None

    def _tool_invocation(self, tool_call_id: str) -> UIMessagePart:
        part = self._find_in_step(tool_call_id, dynamic=None)
        if part is None:
            for candidate in reversed(self._message["parts"]):
                if _is_tool_part(candidate) and candidate.get("toolCallId") == tool_call_id:
                    part = candidate
                    break
        if part is None:
            raise UIMessageStreamError(
                f'No tool invocation found for tool call ID "{tool_call_id}".',
                chunk_type="tool-invocation",
                chunk_id=tool_call_id,
            )
        return part

    # -- tool part updates ----------------------------------------------------------------

    def _update_tool(
        self,
        *,
        dynamic: bool,
        tool_name: str,
        tool_call_id: str,
        state: str,
        values: dict[str, Any],
        existing: UIMessagePart | None = None,
    ) -> None:
        """``updateToolPart``/``updateDynamicToolPart``: overwrite, keep sticky fields."""
        part = (
            existing if existing is not None else self._find_in_step(tool_call_id, dynamic=dynamic)
        )
        metadata = values.get("providerMetadata", _MISSING)
        metadata_key = (
            "resultProviderMetadata" if state in _RESULT_STATES else "callProviderMetadata"
        )
        encoding = values.get("inputEncoding", _MISSING) if state == "input-streaming" else _MISSING
        title = values.get("title", _MISSING)
        tool_metadata = values.get("toolMetadata", _MISSING)
        executed = values.get("providerExecuted", _MISSING)
        if part is None:
            part = {"type": "dynamic-tool", "toolName": tool_name} if dynamic else {}
            part.setdefault("type", f"tool-{tool_name}")
            part["toolCallId"] = tool_call_id
            part["state"] = state
            self._message["parts"].append(part)
        else:
            part["state"] = state
            if dynamic:
                part["toolName"] = tool_name
        for key in _OVERWRITTEN:
            _set_or_drop(part, key, values.get(key, _MISSING))
        _set_or_drop(part, "inputEncoding", encoding)
        if title is not _MISSING:
            part["title"] = title
        if tool_metadata is not _MISSING:
            part["toolMetadata"] = tool_metadata
        if executed is not _MISSING:
            part["providerExecuted"] = executed
        if metadata is not _MISSING:
            part[metadata_key] = metadata

    def _tool_input_start(self, chunk: UIMessageChunk) -> None:
        call_id = str(chunk["toolCallId"])
        self._partial_calls[call_id] = {
            "text": "",
            "toolName": chunk["toolName"],
            "dynamic": bool(chunk.get("dynamic")),
            "inputEncoding": _present(chunk, "inputEncoding"),
            "title": _present(chunk, "title"),
            "toolMetadata": _present(chunk, "toolMetadata"),
        }
        self._update_tool(
            dynamic=bool(chunk.get("dynamic")),
            tool_name=str(chunk["toolName"]),
            tool_call_id=call_id,
            state="input-streaming",
            values={
                "inputEncoding": _present(chunk, "inputEncoding"),
                "providerExecuted": _present(chunk, "providerExecuted"),
                "title": _present(chunk, "title"),
                "toolMetadata": _present(chunk, "toolMetadata"),
                "providerMetadata": _present(chunk, "providerMetadata"),
            },
        )

    def _tool_input_delta(self, chunk: UIMessageChunk) -> None:
        call_id = str(chunk["toolCallId"])
        partial = self._partial_calls.get(call_id)
        if partial is None:
            raise UIMessageStreamError(
                f'Received tool-input-delta for missing tool call with ID "{call_id}". '
                'Ensure a "tool-input-start" chunk is sent before any "tool-input-delta" chunks.',
                chunk_type="tool-input-delta",
                chunk_id=call_id,
            )
        partial["text"] += chunk["inputTextDelta"]
        text = partial["text"]
        value = text if partial["inputEncoding"] == "text" else parse_partial_json(text, _MISSING)
        self._update_tool(
            dynamic=partial["dynamic"],
            tool_name=str(partial["toolName"]),
            tool_call_id=call_id,
            state="input-streaming",
            values={
                "input": value,
                "rawInput": text,
                "inputEncoding": partial["inputEncoding"],
                "title": partial["title"],
                "toolMetadata": _clone(partial["toolMetadata"]),
            },
        )

    def _tool_input_available(self, chunk: UIMessageChunk) -> None:
        self._update_tool(
            dynamic=bool(chunk.get("dynamic")),
            tool_name=str(chunk["toolName"]),
            tool_call_id=str(chunk["toolCallId"]),
            state="input-available",
            values={
                "input": _get(chunk, "input"),
                "providerExecuted": _present(chunk, "providerExecuted"),
                "providerMetadata": _present(chunk, "providerMetadata"),
                "title": _present(chunk, "title"),
                "toolMetadata": _present(chunk, "toolMetadata"),
            },
        )

    def _tool_input_error(self, chunk: UIMessageChunk) -> None:
        call_id = str(chunk["toolCallId"])
        existing = self._find_in_step(call_id, dynamic=None)
        dynamic = (
            existing["type"] == "dynamic-tool"
            if existing is not None
            else bool(chunk.get("dynamic"))
        )
        values: dict[str, Any] = {
            "errorText": chunk["errorText"],
            "providerExecuted": _present(chunk, "providerExecuted"),
            "providerMetadata": _present(chunk, "providerMetadata"),
            "toolMetadata": _present(chunk, "toolMetadata"),
        }
        # Static parts keep the unparsable input in the deprecated ``rawInput``, as the SDK does.
        values["input" if dynamic else "rawInput"] = _get(chunk, "input")
        self._update_tool(
            dynamic=dynamic,
            tool_name=str(chunk["toolName"]),
            tool_call_id=call_id,
            state="output-error",
            values=values,
        )

    def _tool_output(self, chunk: UIMessageChunk) -> None:
        part = self._tool_invocation(str(chunk["toolCallId"]))
        dynamic = part["type"] == "dynamic-tool"
        tool_metadata = _present(chunk, "toolMetadata")
        values: dict[str, Any] = {
            "input": _clone(part.get("input", _MISSING)),
            "providerExecuted": _present(chunk, "providerExecuted"),
            "providerMetadata": _present(chunk, "providerMetadata"),
            "toolMetadata": tool_metadata,
        }
        if chunk["type"] == "tool-output-available":
            state = "output-available"
            values["output"] = _get(chunk, "output")
            values["preliminary"] = _get(chunk, "preliminary")
        else:
            state = "output-error"
            values["errorText"] = chunk["errorText"]
            if not dynamic:
                values["rawInput"] = part.get("rawInput", _MISSING)
        self._update_tool(
            dynamic=dynamic,
            tool_name=_tool_name(part),
            tool_call_id=str(chunk["toolCallId"]),
            state=state,
            values=values,
            existing=part,
        )

    def _tool_approval_request(self, chunk: UIMessageChunk) -> None:
        part = self._tool_invocation(str(chunk["toolCallId"]))
        approval: dict[str, Any] = {"id": chunk["approvalId"]}
        if chunk.get("approvalDescriptor") is not None:
            approval["descriptor"] = _get(chunk, "approvalDescriptor")
        if "inputSchemaInput" in chunk:
            approval["inputSchemaInput"] = _get(chunk, "inputSchemaInput")
        if chunk.get("reason") is not None:
            approval["requestReason"] = chunk["reason"]
        if chunk.get("isAutomatic") is True:
            approval["isAutomatic"] = True
        if chunk.get("signature") is not None:
            approval["signature"] = chunk["signature"]
        part["state"] = "approval-requested"
        part["approval"] = approval

    def _tool_output_denied(self, chunk: UIMessageChunk) -> None:
        self._tool_invocation(str(chunk["toolCallId"]))["state"] = "output-denied"

    def _tool_approval_response(self, chunk: UIMessageChunk) -> None:
        approval_id = str(chunk["approvalId"])
        for part in self._message["parts"]:
            approval = part.get("approval")
            if (
                _is_tool_part(part)
                and isinstance(approval, dict)
                and approval.get("id") == approval_id
            ):
                break
        else:
            raise UIMessageStreamError(
                f'No tool invocation found for approval ID "{approval_id}".',
                chunk_type="tool-approval-response",
                chunk_id=approval_id,
            )
        part["state"] = "approval-responded"
        part["approval"] = {**approval, "approved": chunk["approved"]}
        if chunk.get("reason") is not None:
            part["approval"]["reason"] = chunk["reason"]
        if chunk.get("providerExecuted") is not None:
            part["providerExecuted"] = chunk["providerExecuted"]
        if chunk.get("providerMetadata") is not None:
            part["callProviderMetadata"] = _get(chunk, "providerMetadata")

    # -- text and reasoning --------------------------------------------------------------

    def _open(self, chunk: UIMessageChunk, kind: str, registry: dict[str, UIMessagePart]) -> None:
        part: UIMessagePart = {"type": kind}
        if kind == "reasoning":
            part["id"] = chunk["id"]
        part["text"] = ""
        _set_or_drop(part, "providerMetadata", _present(chunk, "providerMetadata"))
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
            part["providerMetadata"] = _get(chunk, "providerMetadata")
        return part

    def _delta(self, chunk: UIMessageChunk, kind: str, registry: dict[str, UIMessagePart]) -> None:
        part = self._active(chunk, kind, registry)
        part["text"] += chunk["delta"]

    def _end(self, chunk: UIMessageChunk, kind: str, registry: dict[str, UIMessagePart]) -> None:
        part = self._active(chunk, kind, registry)
        part["state"] = "done"
        if kind == "text" and chunk.get("citations") is not None:
            part["citations"] = _get(chunk, "citations")
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
            _set_or_drop(part, key, _get(chunk, key))
        self._message["parts"].append(part)

    def _data(self, chunk: UIMessageChunk) -> bool:
        if chunk.get("transient") is True:
            return False
        if chunk.get("id") is not None:
            for part in self._message["parts"]:
                if part.get("type") == chunk["type"] and part.get("id") == chunk["id"]:
                    part["data"] = _get(chunk, "data")
                    return True
        self._message["parts"].append(copy.deepcopy(chunk))
        return True

    def _reset_step(self) -> bool:
        self._active_text.clear()
        self._active_reasoning.clear()
        self._partial_calls.clear()
        start = self._step_start_index() + 1
        removed = len(self._message["parts"]) > start
        del self._message["parts"][start:]
        return removed

    def apply(self, chunk: UIMessageChunk) -> bool:
        """Apply one chunk; True when the SDK would emit a snapshot for it."""
        kind = str(chunk.get("type"))
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
        "tool-input-start": _tool_input_start,
        "tool-input-delta": _tool_input_delta,
        "tool-input-available": _tool_input_available,
        "tool-input-error": _tool_input_error,
        "tool-approval-request": _tool_approval_request,
        "tool-approval-response": _tool_approval_response,
        "tool-output-available": _tool_output,
        "tool-output-error": _tool_output,
        "tool-output-denied": _tool_output_denied,
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
