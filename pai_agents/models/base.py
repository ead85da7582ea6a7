"""The model boundary: what the engine asks a provider for, and what a provider streams back.

One call of :meth:`LanguageModel.stream` is one model step. Providers translate a
:class:`ModelRequest` (provider-neutral messages in the AI SDK ModelMessage shape) to their
wire format and yield :data:`StepStreamPart` dicts, the AI SDK's LanguageModel stream parts.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import (
    Any,
    Literal,
    NotRequired,
    Protocol,
    TypeAlias,
    TypedDict,
    cast,
    runtime_checkable,
)

from pydantic import BaseModel

from pai_agents.abort import AbortSignal
from pai_agents.json import ensure_strict_json

__all__ = [
    "LanguageModel",
    "ModelError",
    "ModelMessage",
    "ModelRequest",
    "ModelSelection",
    "ModelSettings",
    "ProviderTool",
    "ResponseFormat",
    "StepStreamPart",
    "ToolChoice",
    "ToolSpec",
    "Usage",
    "add_usage",
    "provider_tool_definitions",
]


class Usage(TypedDict, total=False):
    """Token usage of one step, AI SDK field names."""

    inputTokens: int
    outputTokens: int
    totalTokens: int
    reasoningTokens: int
    cachedInputTokens: int
    # True when some of the counts are PAI's estimate (a cancelled or failed step, or an
    # attempt that was retried, whose provider sent no usage), not the provider's report.
    estimated: bool


_USAGE_COUNTS = (
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "reasoningTokens",
    "cachedInputTokens",
)


def add_usage(left: Usage, right: Usage) -> Usage:
    total: dict[str, Any] = {}
    lhs: Mapping[str, Any] = left
    rhs: Mapping[str, Any] = right
    for key in _USAGE_COUNTS:
        if key in lhs or key in rhs:
            total[key] = int(lhs.get(key, 0)) + int(rhs.get(key, 0))
    if left.get("estimated") or right.get("estimated"):
        total["estimated"] = True
    return cast(Usage, total)


class ModelSettings(TypedDict, total=False):
    """Portable generation controls (the AI SDK's LanguageModelCallOptions allowlist)."""

    maxOutputTokens: int
    temperature: float
    topP: float
    topK: int
    presencePenalty: float
    frequencyPenalty: float
    stopSequences: list[str]
    seed: int
    reasoning: Any


# A model message: {"role": "system", "content": str} or {"role": "user" | "assistant" |
# "tool", "content": [content parts]} with the AI SDK's content part shapes
# (text, reasoning, file, tool-call, tool-result).
ModelMessage: TypeAlias = dict[str, Any]

# One part of a model step stream. Types (AI SDK LanguageModel stream parts):
#   {"type": "text-start" | "text-end", "id"}          {"type": "text-delta", "id", "delta"}
#   {"type": "reasoning-start" | "reasoning-end", "id"} {"type": "reasoning-delta", "id", "delta"}
#   {"type": "tool-input-start", "id", "toolName"}     {"type": "tool-input-delta", "id", "delta"}
#   {"type": "tool-input-end", "id"}
#   {"type": "tool-call", "toolCallId", "toolName", "input": <JSON text>, "providerExecuted"?}
#   {"type": "tool-result", "toolCallId", "toolName", "result", "isError"?, "providerExecuted"}
#     (a provider tool's result, reported by the provider that ran it)
#   {"type": "response-metadata", "id"?, "modelId"?}
#   {"type": "finish", "finishReason", "usage": Usage, "rawFinishReason"?}
StepStreamPart: TypeAlias = dict[str, Any]

ToolChoice: TypeAlias = "Literal['auto', 'none', 'required'] | dict[str, str]"


class ResponseFormat(TypedDict):
    """Structured output: JSON, optionally matching a JSON schema (AI SDK responseFormat)."""

    type: Literal["json"]
    schema: NotRequired[dict[str, Any]]
    name: NotRequired[str]
    description: NotRequired[str]


class ToolSpec(TypedDict):
    """A tool as the model sees it."""

    name: str
    description: NotRequired[str]
    inputSchema: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ProviderTool:
    """A provider-defined tool (AD-071): the provider runs it, PAI only sends its definition.

    ``definition`` is the provider-native tool definition, strict JSON sent as given (e.g.
    OpenAI's ``{"type": "web_search"}``); it is copied here, so mutating the mapping it was
    made from changes nothing. ``input_schema`` (a pydantic model), when given, validates the
    input of the calls the provider reports for this tool (LC-127). PAI never executes such a
    call, routes it to a client or makes it a pending action.
    """

    definition: Mapping[str, Any]
    input_schema: type[BaseModel] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.definition, Mapping) or not self.definition:
            raise TypeError("a provider tool definition must be a non-empty JSON object")
        # NotStrictJson (a ValueError) for NaN, non-string keys or non-JSON values.
        value = dict(self.definition)
        ensure_strict_json(value, what="definition")
        object.__setattr__(self, "definition", MappingProxyType(copy.deepcopy(value)))
        schema = self.input_schema
        if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise TypeError("a provider tool's input_schema must be a pydantic model class")

    def wire(self) -> dict[str, Any]:
        """A fresh copy of the definition, for one provider request."""
        return copy.deepcopy(dict(self.definition))


def provider_tool_definitions(tools: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Name -> provider-native definition, as :attr:`ModelRequest.provider_tools` carries it.

    Values are :class:`ProviderTool` instances or, in hand-built requests, plain definition
    mappings (an ``inputSchema`` key there is PAI's validation model, not wire content).
    """
    out: dict[str, dict[str, Any]] = {}
    for name, tool in tools.items():
        if isinstance(tool, ProviderTool):
            out[name] = tool.wire()
        else:
            out[name] = copy.deepcopy({k: v for k, v in tool.items() if k != "inputSchema"})
    return out


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """Everything one model step needs; providers must not reach anywhere else."""

    messages: list[ModelMessage]
    system: str | None = None
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: ToolChoice | None = None
    settings: ModelSettings = field(default_factory=lambda: ModelSettings())
    provider_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The AI SDK's responseFormat: {"type": "json", "schema"?, "name"?, "description"?}
    # asks for JSON output matching ``schema``; None means text.
    response_format: ResponseFormat | None = None
    # Provider-defined tools (AD-071): registration name -> provider-native definition (JSON),
    # sent beside ``tools``; the provider runs them and reports their calls in the stream
    # marked ``providerExecuted`` (validated against these names, LC-127).
    provider_tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


class ModelError(Exception):
    """A provider failed (HTTP error, malformed stream).

    ``retryable`` marks transient faults (connection errors, timeouts, 408/409/429, 5xx): the
    run loop retries the step for those, with backoff, up to the run's ``max_retries``;
    ``retry_after`` is the server's ``Retry-After`` hint in seconds, when it sent one.
    """

    def __init__(
        self, message: str, *, retryable: bool = False, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


@runtime_checkable
class LanguageModel(Protocol):
    """A model that streams one step at a time."""

    @property
    def provider(self) -> str: ...

    @property
    def model_id(self) -> str: ...

    def stream(
        self, request: ModelRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StepStreamPart]: ...


@dataclass(frozen=True, kw_only=True)
class ModelSelection:
    """A model plus the settings and provider options every step of a run starts from."""

    model: LanguageModel
    settings: ModelSettings = field(default_factory=lambda: ModelSettings())
    provider_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # AD-022: provider name -> JSON object; anything else is refused here, not at a call.
        if not isinstance(self.provider_options, Mapping):
            raise TypeError("provider_options must map provider names to JSON objects")
        for provider, options in self.provider_options.items():
            if not isinstance(provider, str) or not isinstance(options, Mapping):
                raise TypeError(
                    f"provider_options[{provider!r}] must be a JSON object keyed by a provider name"
                )
            # NotStrictJson (a ValueError) for NaN, non-string keys or non-JSON values.
            ensure_strict_json(dict(options), what=f"provider_options[{provider!r}]")
