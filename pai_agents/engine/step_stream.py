"""Turning a model's step stream into UIMessageChunks for one assistant message.

The translator keeps the grammar exact (PROTOCOL.md section 9): one ``start`` first, every
text and reasoning part ended, ``tool-input-start`` before any delta and none after
``tool-input-available``. It reads a provider's parts and the canonical ones hooks return
(:func:`~pai_agents.lifecycle.streams.canonical_part`, LC-104). Tool calls are validated
the moment the stream completes them; provider-executed ones too, but those never become
:class:`PendingCall` values (:mod:`pai_agents.engine.provider_calls`, LC-127).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

from pai_agents.engine.provider_calls import ProviderCalls, json_safe
from pai_agents.lifecycle.streams import canonical_part
from pai_agents.messages.types import UIMessageChunk
from pai_agents.models.base import StepStreamPart, Usage
from pai_agents.tools import Tool, ToolInputError

__all__ = ["CanonicalStepTranslator", "PendingCall", "StepTranslator"]

# Where a delta part keeps its fragment: canonical field first, the provider's second.
_FRAGMENT: Final = {"text-delta": ("delta", "text"), "reasoning-delta": ("text", "delta")}


def _fragment(part: StepStreamPart, kind: str) -> Any:
    first, second = _FRAGMENT[kind]
    return part[first] if first in part else part[second]


@dataclass(frozen=True, kw_only=True)
class PendingCall:
    """A validated tool call waiting to execute."""

    tool_call_id: str
    tool: Tool
    input: Any
    parsed: BaseModel


class StepTranslator:
    """Stateful mapping of one step's StepStreamParts to UIMessageChunks.

    ``provider_tools`` are the provider tools the attempt advertised (name -> definition):
    the authority for provider-executed calls. ``tool_call_count`` counts the calls the
    runtime owns (a step with none ends the run); provider-executed ones are in
    ``provider_call_count``.
    """

    def __init__(
        self, tools: Mapping[str, Tool], *, provider_tools: Mapping[str, Any] | None = None
    ) -> None:
        self._tools = tools
        self._provider = ProviderCalls(provider_tools or {})
        self._open: dict[str, str] = {}  # part id -> "text" | "reasoning"
        self._started_calls: set[str] = set()
        self._provider_started: set[str] = set()
        self._dynamic: dict[str, bool] = {}  # call id -> the kind its first chunk chose
        self._marked_dynamic: set[str] = set()  # calls the stream itself marked dynamic
        self._settled_calls: set[str] = set()
        self.calls: list[PendingCall] = []
        self.tool_call_count = 0
        self.finish_reason = "other"
        self.usage: Usage = {}
        self.response: dict[str, Any] = {}
        # Called with a reasoning part's id when it ends (reasoning summaries), else None.
        self.on_reasoning_end: Callable[[str], None] | None = None

    @property
    def provider_call_count(self) -> int:
        return self._provider.count

    def translate(self, part: StepStreamPart) -> list[UIMessageChunk]:
        kind = part["type"]
        if kind in _FRAGMENT:
            return [{"type": kind, "id": part["id"], "delta": _fragment(part, kind)}]
        if kind in ("text-start", "reasoning-start"):
            self._open[part["id"]] = kind.split("-")[0]
            return [{"type": kind, "id": part["id"]}]
        if kind in ("text-end", "reasoning-end"):
            if self._open.pop(part["id"], None) is None:
                return []
            if kind == "reasoning-end" and self.on_reasoning_end is not None:
                self.on_reasoning_end(part["id"])  # AD-050: its summary starts now
            return [{"type": kind, "id": part["id"]}]
        if kind == "tool-input-start":
            return self._input_start(
                part["id"],
                part["toolName"],
                provider=part.get("providerExecuted") is True,
                dynamic=part.get("dynamic") is True,
            )
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
            return self._call(part)
        if kind in ("tool-result", "tool-error"):
            # Only a valid provider-executed call takes a result from the stream (LC-127);
            # the runtime's own calls get theirs by executing.
            return self._provider.result(canonical_part(part))
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

    def _call(self, part: StepStreamPart) -> list[UIMessageChunk]:
        call_id, name = str(part.get("toolCallId")), str(part.get("toolName"))
        if call_id in self._settled_calls:  # LC-125, LC-126: the first completion stands
            return []
        self._settled_calls.add(call_id)
        if part.get("providerExecuted") is True:
            marked = part.get("dynamic") is True or call_id in self._marked_dynamic
            chunks: list[UIMessageChunk] = []
            if call_id not in self._started_calls:
                chunks += self._input_start(call_id, name, provider=True, dynamic=marked)
            call = self._provider.call(
                call_id, name, part.get("input"), dynamic=marked, as_dynamic=self._dynamic[call_id]
            )
            return [*chunks, call]
        chunks = self._local_call(call_id, name, part.get("input", ""))
        if call_id in self._provider_started:
            # Started as provider-executed, completed as the runtime's own call: say so
            # (``providerExecuted`` is sticky on the part).
            chunks[-1]["providerExecuted"] = False
        return chunks

    def _input_start(
        self, call_id: str, name: str, *, provider: bool = False, dynamic: bool = False
    ) -> list[UIMessageChunk]:
        self._started_calls.add(call_id)
        if dynamic:
            self._marked_dynamic.add(call_id)
        chunk: UIMessageChunk = {
            "type": "tool-input-start",
            "toolCallId": call_id,
            "toolName": name,
        }
        if provider:
            self._provider_started.add(call_id)
            chunk["providerExecuted"] = True
            dynamic = self._provider.is_dynamic(name, dynamic)
        else:
            dynamic = name not in self._tools
        self._dynamic[call_id] = dynamic
        if dynamic:
            chunk["dynamic"] = True
        return [chunk]

    def _local_call(self, call_id: str, name: str, raw_input: Any) -> list[UIMessageChunk]:
        return self._tool_call(call_id, name, raw_input)

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
    action (LC-121, LC-122); provider-executed calls too, against the attempt's provider
    tools (LC-127). A hook may author ``input`` as a decoded value instead of JSON text.
    Invalid input becomes the model-visible ``tool-input-error`` (LC-123) and keeps its
    input only when that is JSON-serializable (LC-124). Once a call id is settled (validated
    or invalid), later parts naming it cannot replace its canonical input or turn an error
    into a result (LC-125, LC-126).
    """

    def _local_call(self, call_id: str, name: str, raw_input: Any) -> list[UIMessageChunk]:
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
            if json_safe(value):  # LC-124: a non-JSON input is left out of the record
                chunk["input"] = value
            if tool is None:
                chunk["dynamic"] = True
            chunks.append(chunk)
            return chunks
        assert tool is not None
        if not json_safe(value):
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


def _decode_or_raw(raw: str) -> Any:
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        return raw
