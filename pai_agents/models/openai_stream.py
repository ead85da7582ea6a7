"""The Chat Completions chunk stream as provider-neutral step stream parts.

Text and reasoning deltas open and close their parts; streamed tool-call fragments are
assembled by index (or id) and emitted as ``tool-input-*`` parts, then as ``tool-call``s when
the stream ends. A call naming one of the request's provider tools is reported as
``providerExecuted`` (PAI never runs it, LC-127). Chat Completions has no field for a
server-side tool's result; when a server puts one on that streamed call as ``output`` (or
``error``), it becomes the call's ``tool-result``, otherwise the call is recorded without one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from pai_agents.models.base import StepStreamPart, Usage

__all__ = ["StreamState"]

_FINISH_REASONS: dict[str, str] = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content-filter",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
}


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


@dataclass
class _ToolCallState:
    """One streamed tool call as its fragments arrive (the name may come after arguments)."""

    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)
    started: bool = False
    provider: bool = False  # names a provider tool of the request: the server ran it
    result: StepStreamPart | None = None  # that server's reported result, if any


@dataclass
class StreamState:
    """Turns Chat Completions chunks into step stream parts.

    ``provider_tools``: the names whose calls the server executes itself (AD-071).
    """

    provider_tools: frozenset[str] = frozenset()
    # The key of the finish part's ``providerMetadata`` (the model's provider name).
    provider: str = "openai"
    metadata_sent: bool = False
    text_id: str | None = None
    reasoning_id: str | None = None
    tool_calls: list[_ToolCallState] = field(default_factory=list)
    by_index: dict[int, _ToolCallState] = field(default_factory=dict)
    raw_finish_reason: str | None = None
    usage: Usage = field(default_factory=lambda: Usage())
    # Provider facts beside the standard fields (TH-039): ``systemFingerprint``, prediction
    # token counts, a server's own ``timings`` (llama.cpp), as the stream reported them.
    provider_metadata: dict[str, Any] = field(default_factory=dict)

    def consume(self, chunk: Any) -> list[StepStreamPart]:
        """The parts one SDK chunk yields (response metadata first, once)."""
        parts: list[StepStreamPart] = []
        if not self.metadata_sent:
            self.metadata_sent = True
            metadata: StepStreamPart = {"type": "response-metadata"}
            if getattr(chunk, "id", None):
                metadata["id"] = chunk.id
            if getattr(chunk, "model", None):
                metadata["modelId"] = chunk.model
            parts.append(metadata)
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = _convert_usage(usage)
            self.provider_metadata.update(_prediction_tokens(usage))
        self._take_metadata(chunk)
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) not in (0, None):
                continue  # n > 1 is not supported; keep the first candidate only
            delta = choice.delta
            if delta is not None:
                reasoning = getattr(delta, "reasoning_content", None) or getattr(
                    delta, "reasoning", None
                )
                if isinstance(reasoning, str) and reasoning:
                    parts.extend(self._reasoning(reasoning))
                if delta.content:
                    parts.extend(self._text(delta.content))
                for call in delta.tool_calls or []:
                    parts.extend(self._tool_call_delta(call))
            if choice.finish_reason:
                self.raw_finish_reason = choice.finish_reason
        return parts

    def _take_metadata(self, chunk: Any) -> None:
        fingerprint = getattr(chunk, "system_fingerprint", None)
        if isinstance(fingerprint, str) and fingerprint:
            self.provider_metadata["systemFingerprint"] = fingerprint
        extra = getattr(chunk, "model_extra", None) or {}
        timings = extra.get("timings") if isinstance(extra, dict) else None
        if isinstance(timings, dict):
            self.provider_metadata["timings"] = timings

    def _text(self, delta: str) -> list[StepStreamPart]:
        parts = self._close_reasoning()
        if self.text_id is None:
            self.text_id = _new_id("txt_")
            parts.append({"type": "text-start", "id": self.text_id})
        parts.append({"type": "text-delta", "id": self.text_id, "delta": delta})
        return parts

    def _reasoning(self, delta: str) -> list[StepStreamPart]:
        parts = self._close_text()
        if self.reasoning_id is None:
            self.reasoning_id = _new_id("rsn_")
            parts.append({"type": "reasoning-start", "id": self.reasoning_id})
        parts.append({"type": "reasoning-delta", "id": self.reasoning_id, "delta": delta})
        return parts

    def _close_text(self) -> list[StepStreamPart]:
        if self.text_id is None:
            return []
        part: StepStreamPart = {"type": "text-end", "id": self.text_id}
        self.text_id = None
        return [part]

    def _close_reasoning(self) -> list[StepStreamPart]:
        if self.reasoning_id is None:
            return []
        part: StepStreamPart = {"type": "reasoning-end", "id": self.reasoning_id}
        self.reasoning_id = None
        return [part]

    def _tool_call_delta(self, call: Any) -> list[StepStreamPart]:
        index = getattr(call, "index", None)
        call_id = getattr(call, "id", None) or None
        state = self.by_index.get(index) if index is not None else None
        if state is None and index is None and call_id is not None:
            state = next((s for s in self.tool_calls if s.id == call_id), None)
        if state is None or (call_id is not None and state.id not in (None, call_id)):
            # A new call; some servers reuse index 0 for each complete call, told apart by id.
            state = _ToolCallState()
            self.tool_calls.append(state)
            if index is not None:
                self.by_index[index] = state
        if call_id is not None and state.id is None:
            state.id = call_id
        function = getattr(call, "function", None)
        name = getattr(function, "name", None) if function is not None else None
        arguments = getattr(function, "arguments", None) if function is not None else None
        if name and state.name is None:
            state.name = name
            state.provider = name in self.provider_tools
        if state.provider:
            _take_provider_result(state, call)

        parts: list[StepStreamPart] = []
        if not state.started and state.name is not None:
            parts.extend(self._close_text())
            parts.extend(self._close_reasoning())
            state.started = True
            if state.id is None:
                state.id = _new_id("call_")
            start: StepStreamPart = {
                "type": "tool-input-start",
                "id": state.id,
                "toolName": state.name,
            }
            if state.provider:
                start["providerExecuted"] = True
            parts.append(start)
            # Arguments that arrived before the name are flushed now.
            parts.extend(
                {"type": "tool-input-delta", "id": state.id, "delta": piece}
                for piece in state.arguments
                if piece
            )
        if arguments:
            state.arguments.append(arguments)
            if state.started:
                parts.append({"type": "tool-input-delta", "id": state.id, "delta": arguments})
        return parts

    def finish(self) -> list[StepStreamPart]:
        """Close open parts, emit the assembled tool calls, then ``finish`` with usage."""
        parts = self._close_reasoning() + self._close_text()
        made_calls = False
        for state in self.tool_calls:
            if not state.started or state.id is None or state.name is None:
                continue  # a fragment without a tool name cannot be executed
            parts.append({"type": "tool-input-end", "id": state.id})
            call: StepStreamPart = {
                "type": "tool-call",
                "toolCallId": state.id,
                "toolName": state.name,
                "input": "".join(state.arguments) or "{}",
            }
            if not state.provider:
                made_calls = True  # only the runtime's own calls continue the run
                parts.append(call)
                continue
            call["providerExecuted"] = True
            parts.append(call)
            if state.result is not None:
                parts.append({**state.result, "toolCallId": state.id, "toolName": state.name})
        raw = self.raw_finish_reason
        reason = _FINISH_REASONS.get(raw, "other") if raw else "other"
        if made_calls and reason in {"stop", "other"}:
            reason = "tool-calls"
        finish: StepStreamPart = {"type": "finish", "finishReason": reason, "usage": self.usage}
        if raw:
            finish["rawFinishReason"] = raw
        if self.provider_metadata:
            finish["providerMetadata"] = {self.provider: dict(self.provider_metadata)}
        parts.append(finish)
        return parts


def _take_provider_result(state: _ToolCallState, call: Any) -> None:
    """Keep a server-side tool's result the server put on its streamed call (``output``, or
    ``error`` for a failure): not standard Chat Completions, read only when present."""
    for key, is_error in (("error", True), ("output", False)):
        value = getattr(call, key, None)
        if value is not None:
            state.result = {"type": "tool-result", "result": value, "providerExecuted": True}
            if is_error:
                state.result["isError"] = True
            return


def _prediction_tokens(usage: Any) -> dict[str, int]:
    """OpenAI's predicted-output counts, as the AI SDK reports them in provider metadata."""
    details = getattr(usage, "completion_tokens_details", None)
    found: dict[str, int] = {}
    for source, target in (
        ("accepted_prediction_tokens", "acceptedPredictionTokens"),
        ("rejected_prediction_tokens", "rejectedPredictionTokens"),
    ):
        value = getattr(details, source, None) if details is not None else None
        if isinstance(value, int):
            found[target] = value
    return found


def _convert_usage(usage: Any) -> Usage:
    result: Usage = {}
    for source, target in (
        ("prompt_tokens", "inputTokens"),
        ("completion_tokens", "outputTokens"),
        ("total_tokens", "totalTokens"),
    ):
        value = getattr(usage, source, None)
        if isinstance(value, int):
            result[target] = value  # type: ignore[literal-required]
    details = getattr(usage, "completion_tokens_details", None)
    reasoning = getattr(details, "reasoning_tokens", None) if details is not None else None
    if isinstance(reasoning, int):
        result["reasoningTokens"] = reasoning
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(prompt_details, "cached_tokens", None) if prompt_details is not None else None
    if isinstance(cached, int):
        result["cachedInputTokens"] = cached
    return result
