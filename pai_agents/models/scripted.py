"""``ScriptedModel``: a deterministic model for tests, the offline demo and benchmarks.

It is a real :class:`LanguageModel`: it streams step parts exactly as a provider would
(text in small deltas, tool-call arguments in fragments, a finish part with usage), so
everything above the model boundary runs for real.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pai_agents._callables import call_user
from pai_agents.abort import Aborted, AbortSignal
from pai_agents.models.base import ModelRequest, StepStreamPart, Usage

__all__ = [
    "ScriptExhausted",
    "ScriptedModel",
    "ScriptedStep",
    "ScriptedToolCall",
    "last_user_text",
]

_ids = itertools.count(1)


class ScriptExhausted(RuntimeError):
    """The model was asked for more steps than it was given."""


@dataclass(frozen=True, kw_only=True)
class ScriptedToolCall:
    """One tool call of a step. ``provider_executed``: the provider ran it (a provider tool),
    streamed with ``providerExecuted: true`` and then its ``result``, or its ``error`` as an
    ``isError`` result; with neither, no result follows (the provider may send it later).
    ``dynamic`` marks a tool the provider resolved itself."""

    name: str
    input: Any
    id: str | None = None
    provider_executed: bool = False
    result: Any = None
    error: Any = None
    dynamic: bool = False


@dataclass(frozen=True, kw_only=True)
class ScriptedStep:
    """One model step: optional reasoning, optional text, tool calls, usage."""

    text: str | None = None
    reasoning: str | None = None
    tool_calls: Sequence[ScriptedToolCall] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    chunk_size: int = 4
    delay: float = 0.0
    fail_with: BaseException | None = None

    @classmethod
    def reply(cls, text: str, **options: Any) -> ScriptedStep:
        return cls(text=text, **options)

    @classmethod
    def call(
        cls, name: str, input: Any = None, *, id: str | None = None, **options: Any
    ) -> ScriptedStep:
        return cls(tool_calls=[ScriptedToolCall(name=name, input=input or {}, id=id)], **options)


Responder = Callable[[ModelRequest], "ScriptedStep | Any"]


@dataclass(kw_only=True)
class ScriptedModel:
    """Streams scripted steps: a fixed list, or a responder that decides from the request.

    ``requests`` records every :class:`ModelRequest` received, for assertions (its
    ``provider_tools`` included: what a real provider would have been offered, AD-071).
    """

    steps: Iterable[ScriptedStep] = ()
    respond: Responder | None = None
    model_name: str = "scripted"
    record_requests: bool = True
    requests: list[ModelRequest] = field(default_factory=list)
    _queue: list[ScriptedStep] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self._queue = list(self.steps)

    @property
    def provider(self) -> str:
        return "scripted"

    @property
    def model_id(self) -> str:
        return self.model_name

    async def _next_step(self, request: ModelRequest) -> ScriptedStep:
        if self.respond is not None:
            step = await call_user(self.respond, request)
            if not isinstance(step, ScriptedStep):
                raise TypeError(f"ScriptedModel responder returned {type(step).__name__}")
            return step
        if not self._queue:
            raise ScriptExhausted(
                f"ScriptedModel has no step left for request {len(self.requests)}"
            )
        return self._queue.pop(0)

    async def stream(
        self, request: ModelRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StepStreamPart]:
        if self.record_requests:
            self.requests.append(request)
        step = await self._next_step(request)
        serial = next(_ids)
        yield {"type": "response-metadata", "id": f"scripted-{serial}", "modelId": self.model_name}
        output_chars = 0
        for kind, text in (("reasoning", step.reasoning), ("text", step.text)):
            if not text:
                continue
            part_id = f"{kind[0]}{serial}"
            yield {"type": f"{kind}-start", "id": part_id}
            for start in range(0, len(text), max(1, step.chunk_size)):
                await _pause(step.delay, signal)
                delta = text[start : start + step.chunk_size]
                yield {"type": f"{kind}-delta", "id": part_id, "delta": delta}
            output_chars += len(text)
            yield {"type": f"{kind}-end", "id": part_id}
        if step.fail_with is not None:
            raise step.fail_with
        for index, call in enumerate(step.tool_calls):
            call_id = call.id or f"call_{serial}_{index}"
            arguments = call.input if isinstance(call.input, str) else json.dumps(call.input)
            flags = _call_flags(call)
            yield {"type": "tool-input-start", "id": call_id, "toolName": call.name, **flags}
            third = max(1, len(arguments) // 3)
            for start in range(0, len(arguments), third):
                await _pause(step.delay, signal)
                yield {
                    "type": "tool-input-delta",
                    "id": call_id,
                    "delta": arguments[start : start + third],
                }
            yield {"type": "tool-input-end", "id": call_id}
            yield {
                "type": "tool-call",
                "toolCallId": call_id,
                "toolName": call.name,
                "input": arguments,
                **flags,
            }
            result = _provider_result(call, call_id)
            if result is not None:
                yield result
            output_chars += len(arguments)
        # The run continues only for calls the runtime executes (provider tools already ran).
        local = [c for c in step.tool_calls if not c.provider_executed]
        finish = step.finish_reason or ("tool-calls" if local else "stop")
        # A cheap, deterministic estimate: scripted usage must not cost O(history).
        input_tokens = 8 * len(request.messages) + len(request.system or "") // 4
        output_tokens = output_chars // 4 + 1
        usage: Usage = step.usage or {
            "inputTokens": input_tokens,
            "outputTokens": output_tokens,
            "totalTokens": input_tokens + output_tokens,
        }
        yield {"type": "finish", "finishReason": finish, "usage": usage}


def last_user_text(request: ModelRequest) -> str:
    """The text of the latest user message: what a scripted ``respond`` usually decides from."""
    for message in reversed(request.messages):
        if message["role"] == "user":
            return " ".join(
                p.get("text", "") for p in message["content"] if p.get("type") == "text"
            )
    return ""


def _call_flags(call: ScriptedToolCall) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    if call.provider_executed:
        flags["providerExecuted"] = True
    if call.dynamic:
        flags["dynamic"] = True
    return flags


def _provider_result(call: ScriptedToolCall, call_id: str) -> StepStreamPart | None:
    """The provider's ``tool-result`` part of a provider-executed call, if it has one."""
    if not call.provider_executed or (call.result is None and call.error is None):
        return None
    part: StepStreamPart = {"type": "tool-result", "toolCallId": call_id, "toolName": call.name}
    if call.error is not None:
        part.update(result=call.error, isError=True)
    else:
        part["result"] = call.result
    part["providerExecuted"] = True
    if call.dynamic:
        part["dynamic"] = True
    return part


async def _pause(delay: float, signal: AbortSignal | None) -> None:
    if signal is not None and signal.aborted:
        raise Aborted(signal.reason or "aborted")
    if delay > 0:
        await asyncio.sleep(delay)
