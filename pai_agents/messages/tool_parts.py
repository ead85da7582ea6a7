"""The tool-part state machine of the chunk reducer (the SDK's tool branches of
``processUIMessageStream``, PROTOCOL.md section 4).

A tool part moves ``input-streaming`` → ``input-available`` → (``approval-requested`` →
``approval-responded``) → ``output-available`` / ``output-error`` / ``output-denied``. Streamed
input is kept per call id until the step ends, and parsed as partial JSON after each delta.
Updates overwrite the state's fields and keep the sticky ones (title, tool metadata,
``providerExecuted``, provider metadata), as the SDK's ``updateToolPart`` does.
"""

from __future__ import annotations

from typing import Any, Final

from pai_agents.messages.partial_json import parse_partial_json
from pai_agents.messages.reducer_common import (
    MISSING,
    UIMessageStreamError,
    chunk_value,
    clone,
    current_step_parts,
    present,
    set_or_drop,
)
from pai_agents.messages.types import UIMessage, UIMessageChunk, UIMessagePart

__all__ = ["TOOL_CHUNK_TYPES", "ToolParts", "is_tool_part", "tool_name_of"]

_RESULT_STATES: Final = frozenset({"output-available", "output-error"})
_OVERWRITTEN: Final = ("input", "output", "errorText", "rawInput", "preliminary")


def is_tool_part(part: UIMessagePart) -> bool:
    """A static (``tool-<name>``) or ``dynamic-tool`` part."""
    kind = part.get("type", "")
    return isinstance(kind, str) and (kind == "dynamic-tool" or kind.startswith("tool-"))


def tool_name_of(part: UIMessagePart) -> str:
    """The tool a tool part calls, from ``toolName`` or its ``tool-<name>`` type."""
    if part["type"] == "dynamic-tool":
        return str(part["toolName"])
    return str(part["type"])[len("tool-") :]


class ToolParts:
    """Applies the ``tool-*`` chunks to the tool parts of ``message``.

    ``partial_calls`` are the calls whose input is still streaming, by call id; the reducer
    clears them when a step is reset or a new message starts.
    """

    def __init__(self, message: UIMessage) -> None:
        self.message = message
        self.partial_calls: dict[str, dict[str, Any]] = {}
        # Resuming (section 5): only input-streaming tool calls of the last step can continue;
        # open text and reasoning parts are not re-registered, as in the SDK.
        for part in current_step_parts(message):
            if is_tool_part(part) and part.get("state") == "input-streaming":
                raw = part.get("rawInput")
                self.partial_calls[str(part["toolCallId"])] = {
                    "text": raw if isinstance(raw, str) else "",
                    "toolName": tool_name_of(part),
                    "dynamic": part["type"] == "dynamic-tool",
                    "inputEncoding": part.get("inputEncoding", MISSING),
                    "title": part.get("title", MISSING),
                    "toolMetadata": part.get("toolMetadata", MISSING),
                }

    def apply(self, chunk: UIMessageChunk) -> None:
        """Apply one chunk whose type is in :data:`TOOL_CHUNK_TYPES`."""
        _HANDLERS[str(chunk["type"])](self, chunk)

    def _find_in_step(self, tool_call_id: str, *, dynamic: bool | None) -> UIMessagePart | None:
        """A tool part of the current step; ``dynamic=None`` accepts either kind."""
        for part in current_step_parts(self.message):
            if not is_tool_part(part) or part.get("toolCallId") != tool_call_id:
                continue
            if dynamic is None or (part["type"] == "dynamic-tool") == dynamic:
                return part
        return None

    def _tool_invocation(self, tool_call_id: str) -> UIMessagePart:
        part = self._find_in_step(tool_call_id, dynamic=None)
        if part is None:
            for candidate in reversed(self.message["parts"]):
                if is_tool_part(candidate) and candidate.get("toolCallId") == tool_call_id:
                    part = candidate
                    break
        if part is None:
            raise UIMessageStreamError(
                f'No tool invocation found for tool call ID "{tool_call_id}".',
                chunk_type="tool-invocation",
                chunk_id=tool_call_id,
            )
        return part

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
        metadata = values.get("providerMetadata", MISSING)
        metadata_key = (
            "resultProviderMetadata" if state in _RESULT_STATES else "callProviderMetadata"
        )
        encoding = values.get("inputEncoding", MISSING) if state == "input-streaming" else MISSING
        title = values.get("title", MISSING)
        tool_metadata = values.get("toolMetadata", MISSING)
        executed = values.get("providerExecuted", MISSING)
        if part is None:
            part = {"type": "dynamic-tool", "toolName": tool_name} if dynamic else {}
            part.setdefault("type", f"tool-{tool_name}")
            part["toolCallId"] = tool_call_id
            part["state"] = state
            self.message["parts"].append(part)
        else:
            part["state"] = state
            if dynamic:
                part["toolName"] = tool_name
        for key in _OVERWRITTEN:
            set_or_drop(part, key, values.get(key, MISSING))
        set_or_drop(part, "inputEncoding", encoding)
        if title is not MISSING:
            part["title"] = title
        if tool_metadata is not MISSING:
            part["toolMetadata"] = tool_metadata
        if executed is not MISSING:
            part["providerExecuted"] = executed
        if metadata is not MISSING:
            part[metadata_key] = metadata

    def _input_start(self, chunk: UIMessageChunk) -> None:
        call_id = str(chunk["toolCallId"])
        self.partial_calls[call_id] = {
            "text": "",
            "toolName": chunk["toolName"],
            "dynamic": bool(chunk.get("dynamic")),
            "inputEncoding": present(chunk, "inputEncoding"),
            "title": present(chunk, "title"),
            "toolMetadata": present(chunk, "toolMetadata"),
        }
        self._update_tool(
            dynamic=bool(chunk.get("dynamic")),
            tool_name=str(chunk["toolName"]),
            tool_call_id=call_id,
            state="input-streaming",
            values={
                "inputEncoding": present(chunk, "inputEncoding"),
                "providerExecuted": present(chunk, "providerExecuted"),
                "title": present(chunk, "title"),
                "toolMetadata": present(chunk, "toolMetadata"),
                "providerMetadata": present(chunk, "providerMetadata"),
            },
        )

    def _input_delta(self, chunk: UIMessageChunk) -> None:
        call_id = str(chunk["toolCallId"])
        partial = self.partial_calls.get(call_id)
        if partial is None:
            raise UIMessageStreamError(
                f'Received tool-input-delta for missing tool call with ID "{call_id}". '
                'Ensure a "tool-input-start" chunk is sent before any "tool-input-delta" chunks.',
                chunk_type="tool-input-delta",
                chunk_id=call_id,
            )
        partial["text"] += chunk["inputTextDelta"]
        text = partial["text"]
        value = text if partial["inputEncoding"] == "text" else parse_partial_json(text, MISSING)
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
                "toolMetadata": clone(partial["toolMetadata"]),
            },
        )

    def _input_available(self, chunk: UIMessageChunk) -> None:
        self._update_tool(
            dynamic=bool(chunk.get("dynamic")),
            tool_name=str(chunk["toolName"]),
            tool_call_id=str(chunk["toolCallId"]),
            state="input-available",
            values={
                "input": chunk_value(chunk, "input"),
                "providerExecuted": present(chunk, "providerExecuted"),
                "providerMetadata": present(chunk, "providerMetadata"),
                "title": present(chunk, "title"),
                "toolMetadata": present(chunk, "toolMetadata"),
            },
        )

    def _input_error(self, chunk: UIMessageChunk) -> None:
        call_id = str(chunk["toolCallId"])
        existing = self._find_in_step(call_id, dynamic=None)
        dynamic = (
            existing["type"] == "dynamic-tool"
            if existing is not None
            else bool(chunk.get("dynamic"))
        )
        values: dict[str, Any] = {
            "errorText": chunk["errorText"],
            "providerExecuted": present(chunk, "providerExecuted"),
            "providerMetadata": present(chunk, "providerMetadata"),
            "toolMetadata": present(chunk, "toolMetadata"),
        }
        # Static and dynamic parts alike keep the rejected input in ``input``: the pinned SDK
        # (ai 7.0.173, checked by tests/integration/test_ai_sdk_conformance.py) no longer
        # writes the deprecated ``rawInput`` here.
        values["input"] = chunk_value(chunk, "input")
        self._update_tool(
            dynamic=dynamic,
            tool_name=str(chunk["toolName"]),
            tool_call_id=call_id,
            state="output-error",
            values=values,
        )

    def _output(self, chunk: UIMessageChunk) -> None:
        part = self._tool_invocation(str(chunk["toolCallId"]))
        dynamic = part["type"] == "dynamic-tool"
        tool_metadata = present(chunk, "toolMetadata")
        values: dict[str, Any] = {
            "input": clone(part.get("input", MISSING)),
            "providerExecuted": present(chunk, "providerExecuted"),
            "providerMetadata": present(chunk, "providerMetadata"),
            "toolMetadata": tool_metadata,
        }
        if chunk["type"] == "tool-output-available":
            state = "output-available"
            values["output"] = chunk_value(chunk, "output")
            values["preliminary"] = chunk_value(chunk, "preliminary")
        else:
            state = "output-error"
            values["errorText"] = chunk["errorText"]
            if not dynamic:
                values["rawInput"] = part.get("rawInput", MISSING)
        self._update_tool(
            dynamic=dynamic,
            tool_name=tool_name_of(part),
            tool_call_id=str(chunk["toolCallId"]),
            state=state,
            values=values,
            existing=part,
        )

    def _approval_request(self, chunk: UIMessageChunk) -> None:
        part = self._tool_invocation(str(chunk["toolCallId"]))
        approval: dict[str, Any] = {"id": chunk["approvalId"]}
        if chunk.get("approvalDescriptor") is not None:
            approval["descriptor"] = chunk_value(chunk, "approvalDescriptor")
        if "inputSchemaInput" in chunk:
            approval["inputSchemaInput"] = chunk_value(chunk, "inputSchemaInput")
        if chunk.get("reason") is not None:
            approval["requestReason"] = chunk["reason"]
        if chunk.get("isAutomatic") is True:
            approval["isAutomatic"] = True
        if chunk.get("signature") is not None:
            approval["signature"] = chunk["signature"]
        part["state"] = "approval-requested"
        part["approval"] = approval

    def _output_denied(self, chunk: UIMessageChunk) -> None:
        self._tool_invocation(str(chunk["toolCallId"]))["state"] = "output-denied"

    def _approval_response(self, chunk: UIMessageChunk) -> None:
        approval_id = str(chunk["approvalId"])
        for part in self.message["parts"]:
            approval = part.get("approval")
            if (
                is_tool_part(part)
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
            part["callProviderMetadata"] = chunk_value(chunk, "providerMetadata")


_HANDLERS: Final[dict[str, Any]] = {
    "tool-input-start": ToolParts._input_start,
    "tool-input-delta": ToolParts._input_delta,
    "tool-input-available": ToolParts._input_available,
    "tool-input-error": ToolParts._input_error,
    "tool-approval-request": ToolParts._approval_request,
    "tool-approval-response": ToolParts._approval_response,
    "tool-output-available": ToolParts._output,
    "tool-output-error": ToolParts._output,
    "tool-output-denied": ToolParts._output_denied,
}
TOOL_CHUNK_TYPES: Final = frozenset(_HANDLERS)
"""The chunk types :meth:`ToolParts.apply` handles."""
