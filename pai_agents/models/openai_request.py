"""Provider-neutral requests as Chat Completions ``create`` keyword arguments.

AI SDK ModelMessages become Chat Completions messages, tool specs become ``function`` tools,
settings and ``responseFormat`` become their body fields, and provider options go to a known
SDK parameter or else ride in ``extra_body``. Provider tools (AD-071) are appended to ``tools``
exactly as declared, after the functions: OpenAI's own Chat Completions accepts only
``function`` (and ``custom``) tools, other compatible servers accept their own tool types, and
this conversion does not second-guess them.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Mapping
from typing import Any

from openai.resources.chat.completions import AsyncCompletions

from pai_agents.models.base import ModelMessage, ModelRequest, ModelSettings, ToolSpec
from pai_agents.models.openai_files import convert_file_part

__all__ = ["build_request_params", "convert_messages"]

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


def build_request_params(request: ModelRequest, *, model: str, provider: str) -> dict[str, Any]:
    """The keyword arguments for a streaming ``chat.completions.create`` of ``request``."""
    params: dict[str, Any] = {
        "model": model,
        "messages": convert_messages(request, provider=provider),
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
    for key, value in (request.provider_options.get(provider) or {}).items():
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
