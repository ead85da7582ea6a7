"""UIMessages to provider-neutral ModelMessages: a port of the AI SDK's ``convertToModelMessages``.

Stored transcripts hold UIMessages only (MF-033); the ``tool`` role messages a provider needs
are derived here on every call. See PROTOCOL.md section 8 for the rules ported.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from pai_agents.messages.types import UIMessage, UIMessagePart
from pai_agents.models.base import ModelMessage

__all__ = ["DataPartConverter", "prune_reasoning", "to_model_messages"]

# Maps a ``data-*`` part to a text or file content part, or None to drop it. PAI extension:
# a list of content parts, kept in order (a file reference expands to several, MF-040).
DataPartConverter = Callable[[UIMessagePart], "dict[str, Any] | list[dict[str, Any]] | None"]

DENIED_TEXT: Final = "Tool call execution denied."
TOOL_UNAVAILABLE_TEXT: Final = "Tool output omitted because the tool is no longer available."
_BLOCK_TYPES: Final = frozenset({"text", "custom", "reasoning", "reasoning-file", "file"})
_COMPLETE_STATES: Final = frozenset({"approval-responded", "output-error", "output-denied"})
_REASONING_TYPES: Final = frozenset({"reasoning", "reasoning-file"})


def _is_tool(part: UIMessagePart) -> bool:
    kind = part.get("type", "")
    return isinstance(kind, str) and (kind == "dynamic-tool" or kind.startswith("tool-"))


def _is_data(part: UIMessagePart) -> bool:
    kind = part.get("type", "")
    return isinstance(kind, str) and kind.startswith("data-")


def _tool_name(part: UIMessagePart) -> str:
    if part["type"] == "dynamic-tool":
        return str(part["toolName"])
    return str(part["type"])[len("tool-") :]


def _with_options(content: dict[str, Any], options: Any) -> dict[str, Any]:
    """Attach ``providerOptions`` only when there are some: the SDK never sends null."""
    if options is not None:
        content["providerOptions"] = copy.deepcopy(options)
    return content


def _file_content(part: UIMessagePart) -> dict[str, Any]:
    reference = part.get("providerReference")
    data: dict[str, Any]
    if reference is not None:
        data = {"type": "reference", "reference": copy.deepcopy(reference)}
    else:
        data = {"type": "url", "url": part["url"]}
    content: dict[str, Any] = {"type": "file", "mediaType": part["mediaType"]}
    if part.get("filename") is not None:
        content["filename"] = part["filename"]
    content["data"] = data
    return _with_options(content, part.get("providerMetadata"))


def _add_converted(
    content: list[dict[str, Any]], converted: dict[str, Any] | list[dict[str, Any]] | None
) -> None:
    if isinstance(converted, list):
        content.extend(converted)
    elif converted is not None:
        content.append(converted)


def _user_content(
    parts: Sequence[UIMessagePart], convert_data_part: DataPartConverter | None
) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in parts:
        if part.get("type") == "text":
            text = {"type": "text", "text": part["text"]}
            content.append(_with_options(text, part.get("providerMetadata")))
        elif part.get("type") == "file":
            content.append(_file_content(part))
        elif _is_data(part) and convert_data_part is not None:
            _add_converted(content, convert_data_part(part))
    return content


def _system_message(message: UIMessage) -> ModelMessage:
    texts = [part for part in message["parts"] if part.get("type") == "text"]
    options: dict[str, Any] = {}
    for part in texts:
        if part.get("providerMetadata") is not None:
            options.update(copy.deepcopy(part["providerMetadata"]))
    result: ModelMessage = {"role": "system", "content": "".join(p["text"] for p in texts)}
    if options:
        result["providerOptions"] = options
    return result


def _tool_output(
    part: UIMessagePart, tools: Mapping[str, object] | None, *, error_mode: str
) -> dict[str, Any]:
    """``createToolModelOutput``: error text/json, a tool's own mapping, or text/json."""
    name = _tool_name(part)
    if part["state"] == "output-error":
        value = part.get("errorText")
        if error_mode == "json":
            return {"type": "error-json", "value": value}
        return {"type": "error-text", "value": str(value)}
    tool = tools.get(name) if tools is not None else None
    if part["type"] == "dynamic-tool" and part.get("dynamic") is False and tool is None:
        return {"type": "text", "value": TOOL_UNAVAILABLE_TEXT}
    output = part.get("output")
    to_model_output = getattr(tool, "to_model_output", None)
    if callable(to_model_output):
        mapped: dict[str, Any] = to_model_output(
            tool_call_id=part["toolCallId"], input=part.get("input"), output=output
        )
        return mapped
    if isinstance(output, str):
        return {"type": "text", "value": output}
    return {"type": "json", "value": copy.deepcopy(output)}


def _tool_call(part: UIMessagePart) -> dict[str, Any]:
    call: dict[str, Any] = {
        "type": "tool-call",
        "toolCallId": part["toolCallId"],
        "toolName": _tool_name(part),
    }
    call_input = part.get("input")
    options = part.get("callProviderMetadata")
    if part["state"] == "output-error":
        call_input = call_input if call_input is not None else part.get("rawInput")
        options = options if options is not None else part.get("resultProviderMetadata")
    if call_input is not None or "input" in part:
        call["input"] = copy.deepcopy(call_input)
    if part.get("providerExecuted") is not None:
        call["providerExecuted"] = part["providerExecuted"]
    return _with_options(call, options)


def _assistant_content(
    block: Sequence[UIMessagePart],
    tools: Mapping[str, object] | None,
    convert_data_part: DataPartConverter | None,
) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in block:
        kind = part["type"]
        if kind in ("text", "reasoning"):
            item = {"type": kind, "text": part["text"]}
            content.append(_with_options(item, part.get("providerMetadata")))
        elif kind == "custom":
            content.append(
                _with_options(
                    {"type": "custom", "kind": part["kind"]}, part.get("providerMetadata")
                )
            )
        elif kind == "file":
            content.append(_file_content(part))
        elif kind == "reasoning-file":
            item = {"type": "reasoning-file", "data": part["url"], "mediaType": part["mediaType"]}
            content.append(_with_options(item, part.get("providerMetadata")))
        elif _is_tool(part):
            if part["state"] == "input-streaming":
                continue
            content.append(_tool_call(part))
            approval = part.get("approval")
            if approval is not None:
                content.append(
                    {
                        "type": "tool-approval-request",
                        "approvalId": approval["id"],
                        "toolCallId": part["toolCallId"],
                    }
                )
            if part.get("providerExecuted") is True and part["state"] in (
                "output-available",
                "output-error",
            ):
                result = {
                    "type": "tool-result",
                    "toolCallId": part["toolCallId"],
                    "toolName": _tool_name(part),
                    "output": _tool_output(part, tools, error_mode="json"),
                }
                options = part.get("resultProviderMetadata")
                if options is None:
                    options = part.get("callProviderMetadata")
                content.append(_with_options(result, options))
        elif _is_data(part) and convert_data_part is not None:
            _add_converted(content, convert_data_part(part))
    return content


def _tool_content(
    block: Sequence[UIMessagePart], tools: Mapping[str, object] | None
) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in block:
        if not _is_tool(part):
            continue
        approval = part.get("approval") or {}
        executed = part.get("providerExecuted") is True
        if executed and approval.get("approved") is None:
            continue
        if approval.get("approved") is not None:
            response: dict[str, Any] = {
                "type": "tool-approval-response",
                "approvalId": approval["id"],
                "approved": approval["approved"],
            }
            if approval.get("reason") is not None:
                response["reason"] = approval["reason"]
            if part.get("providerExecuted") is not None:
                response["providerExecuted"] = part["providerExecuted"]
            content.append(response)
        if executed:
            continue  # its result already sits in the assistant content
        state = part["state"]
        output: dict[str, Any]
        if state == "output-denied":
            reason = approval.get("reason")
            output = {"type": "error-text", "value": DENIED_TEXT if reason is None else reason}
        elif state in ("output-available", "output-error"):
            output = _tool_output(part, tools, error_mode="text")
        elif state == "approval-responded" and approval.get("approved") is False:
            output = {"type": "execution-denied"}
            if approval.get("reason") is not None:
                output["reason"] = approval["reason"]
        else:
            continue  # input-available / approval-requested: the call stays unpaired
        result = {
            "type": "tool-result",
            "toolCallId": part["toolCallId"],
            "toolName": _tool_name(part),
            "output": output,
        }
        content.append(_with_options(result, part.get("callProviderMetadata")))
    return content


def _assistant_messages(
    message: UIMessage,
    tools: Mapping[str, object] | None,
    convert_data_part: DataPartConverter | None,
) -> list[ModelMessage]:
    result: list[ModelMessage] = []
    block: list[UIMessagePart] = []

    def flush() -> None:
        if not block:
            return
        content = _assistant_content(block, tools, convert_data_part)
        if content:
            result.append({"role": "assistant", "content": content})
        tool_content = _tool_content(block, tools)
        if tool_content:
            result.append({"role": "tool", "content": tool_content})
        block.clear()

    for part in message["parts"]:
        kind = part.get("type")
        if kind == "step-start":
            flush()
        elif kind == "steering-message":
            flush()
            steering = _user_content(part.get("parts", []), convert_data_part)
            result.append({"role": "user", "content": steering})
        elif kind in _BLOCK_TYPES or _is_tool(part) or _is_data(part):
            block.append(part)
    flush()
    return result


def _is_complete_tool(part: UIMessagePart) -> bool:
    state = part.get("state")
    if state == "output-available":
        return part.get("preliminary") is not True
    return state in _COMPLETE_STATES


def _filter_parts(
    messages: Sequence[UIMessage], *, ignore_incomplete_tool_calls: bool
) -> list[UIMessage]:
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    filtered: list[UIMessage] = []
    for index, message in enumerate(messages):
        parts = [
            part
            for part in message["parts"]
            if not _is_tool(part)
            or (
                (not ignore_incomplete_tool_calls or _is_complete_tool(part))
                and not (index < last_user and part.get("state") == "approval-requested")
            )
        ]
        filtered.append({**message, "parts": parts})
    return filtered


def to_model_messages(
    messages: Sequence[UIMessage],
    *,
    tools: Mapping[str, object] | None = None,
    ignore_incomplete_tool_calls: bool = False,
    convert_data_part: DataPartConverter | None = None,
) -> list[ModelMessage]:
    """Convert stored UIMessages to the ModelMessages a provider call takes (MF-031).

    ``tools`` maps tool names to tools; a tool with a ``to_model_output(tool_call_id=, input=,
    output=)`` method shapes its own results. Message ids and metadata are not used.
    """
    result: list[ModelMessage] = []
    filtered = _filter_parts(messages, ignore_incomplete_tool_calls=ignore_incomplete_tool_calls)
    for message in filtered:
        role = message["role"]
        if role == "system":
            result.append(_system_message(message))
        elif role == "user":
            content = _user_content(message["parts"], convert_data_part)
            result.append({"role": "user", "content": content})
        elif role == "assistant":
            result.extend(_assistant_messages(message, tools, convert_data_part))
        else:
            raise ValueError(f"Unsupported role: {role!r}")
    return result


def prune_reasoning(messages: list[ModelMessage]) -> list[ModelMessage]:
    """Drop reasoning from assistant messages before the latest user message (LC-097..LC-100).

    Providers reject or bill stale reasoning; the current turn keeps its own (LC-098). With no
    user message nothing is removed (LC-099). An assistant message left empty is dropped
    (LC-100). Returns a new list; the given messages are not changed (LC-102).
    """
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    pruned: list[ModelMessage] = []
    for index, message in enumerate(messages):
        content = message.get("content")
        if index < last_user and message.get("role") == "assistant" and isinstance(content, list):
            kept = [c for c in content if c.get("type") not in _REASONING_TYPES]
            if len(kept) != len(content):
                if not kept:
                    continue
                message = {**message, "content": kept}
        pruned.append(message)
    return pruned
