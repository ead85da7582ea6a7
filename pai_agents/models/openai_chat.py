"""An OpenAI-compatible Chat Completions provider on the official ``openai`` SDK.

Chat Completions is the lowest common denominator of hosted APIs and local servers (vLLM,
Ollama, llama.cpp, LM Studio, gateways), so this one provider covers them all through
``base_url``. It translates a provider-neutral :class:`ModelRequest` to a streaming request and
the chunk stream back to :data:`StepStreamPart` dicts; it keeps no state between calls.

Provider tools (AD-071) are a pass-through: each definition in ``ModelRequest.provider_tools``
is appended to ``tools`` exactly as declared (e.g. ``{"type": "web_search"}``). OpenAI's own
Chat Completions accepts only ``function`` (and ``custom``) tools; other compatible servers
and gateways accept their own tool types, and this provider does not second-guess them. A
streamed tool call naming one of the request's provider tools is reported as
``providerExecuted`` (PAI never runs it, LC-127). Chat Completions has no field for a
server-side tool's result; when a server puts one on that streamed call as ``output`` (or
``error``), it becomes the call's ``tool-result``, otherwise the call is recorded without one.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import re
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import openai
from openai.resources.chat.completions import AsyncCompletions

from pai_agents.abort import Aborted, AbortSignal
from pai_agents.models._openai_files import convert_file_part
from pai_agents.models.base import (
    ModelError,
    ModelMessage,
    ModelRequest,
    ModelSettings,
    StepStreamPart,
    ToolSpec,
    Usage,
)

__all__ = ["OpenAIChatModel", "convert_messages"]

_T = TypeVar("_T")

DEFAULT_MODEL = "gpt-4o-mini"
# Local servers ignore the key but the SDK insists on one.
_LOCAL_PLACEHOLDER_KEY = "not-needed"

_FINISH_REASONS: dict[str, str] = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content-filter",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
}

# Body keys the provider owns; provider options cannot override them.
_RESERVED_KEYS = frozenset({"messages", "model", "stream", "stream_options"})
# Wire message keys that message-local provider options cannot override.
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id"})
# Keyword arguments of ``chat.completions.create`` that are request body fields, so known
# provider options go through the SDK and everything else rides in ``extra_body``.
_KNOWN_PARAMS = (
    frozenset(
        name
        for name in inspect.signature(AsyncCompletions.create).parameters
        if name not in {"self", "extra_headers", "extra_query", "extra_body", "timeout"}
    )
    - _RESERVED_KEYS
)

# HTTP statuses worth retrying: rate limits, server faults, and the ones the SDK itself retries.
_RETRYABLE_STATUSES = frozenset({408, 409, 429})
# Anything shaped like an OpenAI key, in case a server echoes a key other than ours.
_SECRET_PATTERN = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")


class OpenAIChatModel:
    """A :class:`~pai_agents.models.base.LanguageModel` speaking streaming Chat Completions."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        provider: str = "openai",
        max_retries: int = 2,
        timeout: float | None = 60,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        """``default_headers`` go with every request of this model (TH-020: a run that needs
        its own headers swaps in a model configured with them, from around_model_call)."""
        self._model = model
        self._provider = provider
        self._owns_client = client is None
        if client is None:
            key = api_key or os.environ.get("OPENAI_API_KEY") or None
            if key is None:
                if not base_url:
                    raise ValueError(
                        "OpenAIChatModel needs an API key: pass api_key=..., set OPENAI_API_KEY, "
                        "or pass base_url=... for a local server that needs none."
                    )
                key = _LOCAL_PLACEHOLDER_KEY
            self._client_options: dict[str, Any] = {
                "api_key": key,
                "base_url": base_url,
                "max_retries": max_retries,
                "timeout": timeout,
                "default_headers": dict(default_headers or {}) or None,
            }
            self._api_key: str | None = key
        else:
            if default_headers:
                raise ValueError("default_headers configure an owned client; set them on client")
            key_attr = getattr(client, "api_key", None)
            self._api_key = key_attr if isinstance(key_attr, str) else None
        self._given_client = client
        # An httpx connection pool belongs to the event loop that opened it, so an owned client
        # is made per loop: a model shared by several loops (asyncio.run per turn, one loop per
        # worker thread) never reuses a pool from a closed loop.
        self._loop_clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, openai.AsyncOpenAI
        ] = weakref.WeakKeyDictionary()

    @classmethod
    def from_env(cls, model: str | None = None) -> OpenAIChatModel:
        """Build from OPENAI_API_KEY, OPENAI_BASE_URL and PAI_MODEL (default gpt-4o-mini)."""
        return cls(
            model=model or os.environ.get("PAI_MODEL") or DEFAULT_MODEL,
            api_key=os.environ.get("OPENAI_API_KEY") or None,
            base_url=os.environ.get("OPENAI_BASE_URL") or None,
        )

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The client for the running event loop (the given one, or one made for this loop)."""
        if self._given_client is not None:
            return self._given_client
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return openai.AsyncOpenAI(**self._client_options)
        client = self._loop_clients.get(loop)
        if client is None:
            client = self._loop_clients[loop] = openai.AsyncOpenAI(**self._client_options)
        return client

    async def aclose(self) -> None:
        """Close this loop's HTTP client if this model created it (a given one is the caller's)."""
        if self._owns_client:
            client = self._loop_clients.pop(asyncio.get_running_loop(), None)
            if client is not None:
                await client.close()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"OpenAIChatModel(provider={self._provider!r}, model={self._model!r})"

    # -- request ------------------------------------------------------------------------------

    def build_request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``chat.completions.create`` (public for tests and tracing)."""
        params: dict[str, Any] = {
            "model": self._model,
            "messages": convert_messages(request, provider=self._provider),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tools = [_convert_tool(tool) for tool in request.tools]
        # Provider tools ride as given, after the functions (AD-071, module docstring).
        tools += [dict(definition) for definition in request.provider_tools.values()]
        if tools:
            params["tools"] = tools
            if request.tool_choice is not None:
                params["tool_choice"] = _convert_tool_choice(request.tool_choice)
        params.update(_convert_settings(request.settings))
        if request.response_format is not None:
            params["response_format"] = _convert_response_format(request.response_format)

        extra_body: dict[str, Any] = {}
        for key, value in (request.provider_options.get(self._provider) or {}).items():
            name = key if key in _KNOWN_PARAMS else _snake_case(key)
            if name in _RESERVED_KEYS:
                continue
            if name in _KNOWN_PARAMS:
                params[name] = value
            else:
                extra_body[key] = value
        if extra_body:
            params["extra_body"] = extra_body
        return params

    # -- streaming ----------------------------------------------------------------------------

    async def stream(
        self, request: ModelRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StepStreamPart]:
        """Stream one step; raises :class:`ModelError` on provider faults, ``Aborted`` on abort."""
        if signal is not None:
            signal.raise_if_aborted()
        params = self.build_request_params(request)
        watch = _AbortWatch(signal)
        sdk_stream: openai.AsyncStream[Any] | None = None
        functions = {tool["name"] for tool in request.tools}
        state = _StreamState(provider_tools=frozenset(request.provider_tools) - functions)
        try:
            try:
                opened = await watch.wait(self.client.chat.completions.create(**params))
                sdk_stream = opened
                while True:
                    watch.check()
                    try:
                        chunk = await watch.wait(opened.__anext__())
                    except StopAsyncIteration:
                        break
                    for part in state.consume(chunk):
                        yield part
                watch.check()
            except (Aborted, asyncio.CancelledError):
                raise
            except openai.OpenAIError as exc:
                watch.check()
                raise self._model_error(exc) from None
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                watch.check()
                raise ModelError(f"{self._label}: malformed stream ({exc})") from None
            for part in state.finish():
                yield part
        finally:
            watch.close()
            if sdk_stream is not None:
                with contextlib.suppress(Exception):  # cleanup must not mask the real outcome
                    await sdk_stream.close()

    @property
    def _label(self) -> str:
        return f"{self._provider}:{self._model}"

    def _model_error(self, exc: openai.OpenAIError) -> ModelError:
        """Translate an SDK error into a key-free :class:`ModelError` with a retry hint."""
        retryable = False
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            retryable = status in _RETRYABLE_STATUSES or status >= 500
            detail = f"HTTP {status}: {_error_text(exc)}"
        elif isinstance(exc, openai.APITimeoutError):
            retryable = True
            detail = "request timed out"
        elif isinstance(exc, openai.APIConnectionError):
            retryable = True
            detail = f"connection error: {exc.message}"
        elif isinstance(exc, openai.APIError):
            # An error event inside an otherwise successful stream.
            kind = exc.type or exc.code or ""
            retryable = kind in {"server_error", "rate_limit_exceeded", "overloaded_error"}
            detail = f"stream error: {_error_text(exc)}"
        else:
            detail = str(exc)
        return ModelError(f"{self._label}: {self._scrub(detail)}", retryable=retryable)

    def _scrub(self, text: str) -> str:
        if self._api_key and self._api_key != _LOCAL_PLACEHOLDER_KEY:
            text = text.replace(self._api_key, "***")
        return _SECRET_PATTERN.sub("***", text)


# -- message conversion -------------------------------------------------------------------------


def convert_messages(request: ModelRequest, *, provider: str = "openai") -> list[dict[str, Any]]:
    """AI SDK ModelMessages (plus ``request.system``) as Chat Completions messages."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in request.messages:
        out.extend(_convert_message(message, provider))
    return out


def _convert_message(message: ModelMessage, provider: str) -> list[dict[str, Any]]:
    role = message.get("role")
    content = message.get("content")
    # Message-local provider options ride on the wire message, as the AI SDK's
    # OpenAI-compatible provider sends them: e.g. a gateway's ``cache_control`` marking the
    # assembled system prompt for prompt caching (TH-006). Only message-level options count:
    # part-level ones may come from client-sent parts, which must not shape the wire request.
    extra = _provider_fields(message, provider)
    if role == "system":
        return [{"role": "system", "content": _plain_text(content), **extra}]
    if role == "user":
        return [{"role": "user", "content": _convert_user_content(content, provider), **extra}]
    if role == "assistant":
        return [{**_convert_assistant(content), **extra}]
    if role == "tool":
        return [
            {
                "role": "tool",
                "tool_call_id": part["toolCallId"],
                "content": _tool_output_text(part.get("output")),
            }
            for part in _parts(content)
            if part.get("type") == "tool-result"
        ]
    raise ValueError(f"unsupported model message role: {role!r}")


def _provider_fields(item: Mapping[str, Any], provider: str) -> dict[str, Any]:
    """``item.providerOptions[provider]``, minus keys the wire shape owns."""
    options = (item.get("providerOptions") or {}).get(provider) or {}
    return {k: v for k, v in options.items() if k not in _MESSAGE_KEYS}


def _parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _plain_text(content: Any) -> str:
    return "".join(part.get("text", "") for part in _parts(content) if part.get("type") == "text")


def _convert_user_content(content: Any, provider: str) -> str | list[dict[str, Any]]:
    parts = _parts(content)
    if len(parts) == 1 and parts[0].get("type") == "text":
        return str(parts[0].get("text", ""))
    converted: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text":
            converted.append({"type": "text", "text": part.get("text", "")})
        elif kind in {"file", "image"}:
            converted.append(convert_file_part(part, provider))
    return converted


def _convert_assistant(content: Any) -> dict[str, Any]:
    text: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    for part in _parts(content):
        kind = part.get("type")
        if kind == "text":
            text.append(part.get("text", ""))
        elif kind == "tool-call" and not part.get("providerExecuted"):
            tool_calls.append(
                {
                    "id": part["toolCallId"],
                    "type": "function",
                    "function": {
                        "name": part["toolName"],
                        "arguments": json.dumps(part.get("input", {}), ensure_ascii=False),
                    },
                }
            )
        # Reasoning, files and provider-executed tool parts have no Chat Completions input.
    joined = "".join(text)
    message: dict[str, Any] = {"role": "assistant", "content": joined}
    if tool_calls:
        message["tool_calls"] = tool_calls
        if not joined:
            message["content"] = None
    return message


def _tool_output_text(output: Any) -> str:
    """A tool result as the string a ``tool`` message carries."""
    if not isinstance(output, dict):
        return json.dumps(output, ensure_ascii=False)
    kind = output.get("type")
    value = output.get("value")
    if kind in {"text", "error-text"}:
        return str(value)
    if kind in {"json", "error-json"}:
        return json.dumps(value, ensure_ascii=False)
    if kind == "execution-denied":
        reason = output.get("reason")
        return f"Tool execution denied: {reason}" if reason else "Tool execution denied."
    if kind == "content" and isinstance(value, list):
        pieces = []
        for item in value:
            if item.get("type") == "text":
                pieces.append(str(item.get("text", "")))
            else:
                media = item.get("mediaType") or item.get("type")
                pieces.append(f"[{media} content omitted]")
        return "\n".join(pieces)
    return json.dumps(output, ensure_ascii=False)


def _convert_tool(tool: ToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool["name"], "parameters": tool["inputSchema"]}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _convert_tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    if isinstance(choice, Mapping) and choice.get("type") == "tool":
        return {"type": "function", "function": {"name": choice["toolName"]}}
    if isinstance(choice, Mapping) and choice.get("type") in {"auto", "none", "required"}:
        return choice["type"]
    raise ValueError(f"unsupported tool_choice: {choice!r}")


def _convert_settings(settings: ModelSettings) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if "maxOutputTokens" in settings:
        params["max_completion_tokens"] = settings["maxOutputTokens"]
    if "temperature" in settings:
        params["temperature"] = settings["temperature"]
    if "topP" in settings:
        params["top_p"] = settings["topP"]
    if "presencePenalty" in settings:
        params["presence_penalty"] = settings["presencePenalty"]
    if "frequencyPenalty" in settings:
        params["frequency_penalty"] = settings["frequencyPenalty"]
    if settings.get("stopSequences"):
        params["stop"] = list(settings["stopSequences"])
    if "seed" in settings:
        params["seed"] = settings["seed"]
    reasoning = settings.get("reasoning")
    if isinstance(reasoning, Mapping) and reasoning.get("effort"):
        params["reasoning_effort"] = reasoning["effort"]
    # topK has no Chat Completions field; servers that accept it take it via provider options.
    return params


def _convert_response_format(response_format: Mapping[str, Any]) -> dict[str, Any]:
    """The AI SDK responseFormat as Chat Completions ``response_format`` (TH-021)."""
    schema = response_format.get("schema")
    if schema is None:
        return {"type": "json_object"}
    # OpenAI requires ^[a-zA-Z0-9_-]{1,64}$; a pydantic name such as ``Page[Item]`` is not.
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", str(response_format.get("name") or ""))[:64]
    json_schema: dict[str, Any] = {"name": name or "response"}
    if response_format.get("description"):
        json_schema["description"] = response_format["description"]
    json_schema["schema"] = schema
    return {"type": "json_schema", "json_schema": json_schema}


def _snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _error_text(exc: openai.APIError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return exc.message


# -- stream reduction ---------------------------------------------------------------------------


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


@dataclass
class _ToolCallState:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)
    started: bool = False
    provider: bool = False  # names a provider tool of the request: the server ran it
    result: StepStreamPart | None = None  # that server's reported result, if any


@dataclass
class _StreamState:
    """Turns Chat Completions chunks into step stream parts.

    ``provider_tools``: the names whose calls the server executes itself (AD-071).
    """

    provider_tools: frozenset[str] = frozenset()
    metadata_sent: bool = False
    text_id: str | None = None
    reasoning_id: str | None = None
    tool_calls: list[_ToolCallState] = field(default_factory=list)
    by_index: dict[int, _ToolCallState] = field(default_factory=dict)
    raw_finish_reason: str | None = None
    usage: Usage = field(default_factory=lambda: Usage())

    def consume(self, chunk: Any) -> list[StepStreamPart]:
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


# -- abort --------------------------------------------------------------------------------------


class _AbortWatch:
    """Interrupts an in-flight await of the stream when the signal fires.

    The signal may fire from any thread. Its callback hops onto the event loop and cancels
    the consuming task only while that task is suspended inside :meth:`wait` (waiting on the
    network), then the cancellation is turned back into :class:`Aborted` with ``uncancel``.
    This stops the HTTP read at once instead of after the next chunk, which may never come.
    """

    def __init__(self, signal: AbortSignal | None) -> None:
        self._signal = signal
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[Any] | None = None
        self._waiting = False
        self._interrupted = False
        self._closed = False
        if signal is not None:
            signal.on_abort(self._on_abort)

    def _on_abort(self) -> None:
        if self._closed:
            return
        with contextlib.suppress(RuntimeError):  # a closed loop has nothing waiting any more
            self._loop.call_soon_threadsafe(self._interrupt)

    def _interrupt(self) -> None:
        if self._closed or not self._waiting or self._interrupted or self._task is None:
            return
        self._interrupted = True
        self._task.cancel()

    def check(self) -> None:
        """Raise :class:`Aborted` if the signal has fired (between chunks, before requests)."""
        if self._signal is not None:
            self._signal.raise_if_aborted()

    async def wait(self, awaitable: Awaitable[_T]) -> _T:
        """Await ``awaitable``; an abort while waiting raises :class:`Aborted` promptly."""
        self._task = asyncio.current_task()
        self._waiting = True
        try:
            result = await awaitable
        except asyncio.CancelledError:
            if self._take_interrupt() == 0:
                raise Aborted(self._reason()) from None
            raise
        except Exception as exc:
            # The transport may turn our cancellation into its own error.
            if self._take_interrupt() is not None:
                raise Aborted(self._reason()) from exc
            raise
        finally:
            self._waiting = False
        if self._take_interrupt() is not None:
            raise Aborted(self._reason())
        return result

    def _take_interrupt(self) -> int | None:
        """Undo our own ``cancel()``; the remaining cancel count, or None if we did not cancel."""
        if not self._interrupted or self._task is None:
            return None
        self._interrupted = False
        return self._task.uncancel()

    def _reason(self) -> str:
        return (self._signal.reason if self._signal is not None else None) or "aborted"

    def close(self) -> None:
        self._closed = True
