"""Turning a model's step stream into UIMessageChunks for one assistant message.

The translator keeps the grammar exact (PROTOCOL.md section 9): one ``start`` first, every
text and reasoning part ended, ``tool-input-start`` before any delta and none after
``tool-input-available``. Tool calls are validated the moment the model completes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from pai_agents.messages.types import UIMessageChunk
from pai_agents.models.base import StepStreamPart, Usage
from pai_agents.tools import Tool, ToolInputError

__all__ = ["CanonicalStepTranslator", "PendingCall", "StepTranslator"]


@dataclass(frozen=True, kw_only=True)
class PendingCall:
    """A validated tool call waiting to execute."""

    tool_call_id: str
    tool: Tool
    input: Any
    parsed: BaseModel


class StepTranslator:
    """Stateful mapping of one step's StepStreamParts to UIMessageChunks."""

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self._tools = tools
        self._open: dict[str, str] = {}  # part id -> "text" | "reasoning"
        self._started_calls: set[str] = set()
        self.calls: list[PendingCall] = []
        self.tool_call_count = 0
        self.finish_reason = "other"
        self.usage: Usage = {}
        self.response: dict[str, Any] = {}

    def translate(self, part: StepStreamPart) -> list[UIMessageChunk]:
        kind = part["type"]
        if kind in ("text-delta", "reasoning-delta"):
            return [{"type": kind, "id": part["id"], "delta": part["delta"]}]
        if kind in ("text-start", "reasoning-start"):
            self._open[part["id"]] = kind.split("-")[0]
            return [{"type": kind, "id": part["id"]}]
        if kind in ("text-end", "reasoning-end"):
            if self._open.pop(part["id"], None) is None:
                return []
            return [{"type": kind, "id": part["id"]}]
        if kind == "tool-input-start":
            return self._input_start(part["id"], part["toolName"])
        if kind == "tool-input-delta":
            if part["id"] not in self._started_calls:
                return []
            return [
                {
                    "type": "tool-input-delta",
                    "toolCallId": part["id"],
                    "inputTextDelta": part["delta"],
                }
            ]
        if kind == "tool-call":
            return self._tool_call(part["toolCallId"], part["toolName"], part.get("input", ""))
        if kind == "finish":
            self.finish_reason = str(part.get("finishReason") or "other")
            self.usage = part.get("usage") or {}
            return []
        if kind == "response-metadata":
            self.response = {k: v for k, v in part.items() if k != "type" and v is not None}
        return []

    def close_open_parts(self) -> list[UIMessageChunk]:
        """End text/reasoning parts a provider left open (a cut-off stream)."""
        chunks = [{"type": f"{kind}-end", "id": part_id} for part_id, kind in self._open.items()]
        self._open.clear()
        return chunks

    def _input_start(self, call_id: str, name: str) -> list[UIMessageChunk]:
        self._started_calls.add(call_id)
        chunk: UIMessageChunk = {
            "type": "tool-input-start",
            "toolCallId": call_id,
            "toolName": name,
        }
        if name not in self._tools:
            chunk["dynamic"] = True
        return [chunk]

    def _tool_call(self, call_id: str, name: str, raw_input: str) -> list[UIMessageChunk]:
        self.tool_call_count += 1
        chunks: list[UIMessageChunk] = []
        if call_id not in self._started_calls:
            chunks.extend(self._input_start(call_id, name))
        tool = self._tools.get(name)
        if tool is None:
            chunks.append(
                {
                    "type": "tool-input-error",
                    "toolCallId": call_id,
                    "toolName": name,
                    "input": _decode_or_raw(raw_input),
                    "errorText": f"Model tried to call unavailable tool '{name}'.",
                    "dynamic": True,
                }
            )
            return chunks
        try:
            parsed = tool.parse_input(raw_input)
        except ToolInputError as exc:
            chunks.append(
                {
                    "type": "tool-input-error",
                    "toolCallId": call_id,
                    "toolName": name,
                    "input": _decode_or_raw(raw_input),
                    "errorText": str(exc),
                }
            )
            return chunks
        value = json.loads(raw_input) if raw_input.strip() else {}
        chunks.append(
            {
                "type": "tool-input-available",
                "toolCallId": call_id,
                "toolName": name,
                "input": value,
            }
        )
        self.calls.append(PendingCall(tool_call_id=call_id, tool=tool, input=value, parsed=parsed))
        return chunks


class CanonicalStepTranslator(StepTranslator):
    """The hooked path's translator: it reads the stream ``transform_step_stream`` returned.

    Every tool call in that canonical stream, whether the model made it, a hook passed it
    through, rebuilt it or authored it, is parsed exactly once here, after the whole
    transform chain and before it is checkpointed, stored, executed or made a pending
    action (LC-121, LC-122). A hook may author ``input`` as a decoded value instead of JSON
    text. Invalid input becomes the model-visible ``tool-input-error`` (LC-123) and keeps
    its input only when that is JSON-serializable (LC-124). Once a call id is settled
    (validated or invalid), later parts naming it cannot replace its canonical input or
    turn an error into a result (LC-125, LC-126).
    """

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        super().__init__(tools)
        self._settled_calls: set[str] = set()

    def translate(self, part: StepStreamPart) -> list[UIMessageChunk]:
        if part.get("type") == "tool-call":
            call_id = str(part.get("toolCallId"))
            if call_id in self._settled_calls:  # LC-125, LC-126
                return []
            self._settled_calls.add(call_id)
            return self._canonical_call(call_id, str(part.get("toolName")), part.get("input"))
        return super().translate(part)

    def _canonical_call(self, call_id: str, name: str, raw_input: Any) -> list[UIMessageChunk]:
        if isinstance(raw_input, str):
            return self._tool_call(call_id, name, raw_input)
        self.tool_call_count += 1
        chunks: list[UIMessageChunk] = []
        if call_id not in self._started_calls:
            chunks.extend(self._input_start(call_id, name))
        tool = self._tools.get(name)
        value = {} if raw_input is None else raw_input
        error: str | None = None
        if tool is None:
            error = f"Model tried to call unavailable tool '{name}'."
        else:
            try:
                parsed = tool.parse_input(value)
            except ToolInputError as exc:
                error = str(exc)
        if error is not None:
            chunk: UIMessageChunk = {
                "type": "tool-input-error",
                "toolCallId": call_id,
                "toolName": name,
                "errorText": error,
            }
            if _json_safe(value):  # LC-124: a non-JSON input is left out of the record
                chunk["input"] = value
            if tool is None:
                chunk["dynamic"] = True
            chunks.append(chunk)
            return chunks
        assert tool is not None
        if not _json_safe(value):
            value = parsed.model_dump(mode="json")
        chunks.append(
            {
                "type": "tool-input-available",
                "toolCallId": call_id,
                "toolName": name,
                "input": value,
            }
        )
        self.calls.append(PendingCall(tool_call_id=call_id, tool=tool, input=value, parsed=parsed))
        return chunks


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def _decode_or_raw(raw: str) -> Any:
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        return raw
