"""Schema check for UIMessageChunks: the rules of the SDK's ``uiMessageChunkSchema`` (ai@7).

Browsers validate every chunk and fail the whole stream on the first bad one (PROTOCOL.md
section 4.8), so PAI checks chunks before publishing them. Extra keys pass, as in the SDK;
``null`` in an optional typed field does not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from pai_agents.json import is_strict_json
from pai_agents.messages.suspension_parts import SUSPENSION_PART, invalid_suspension
from pai_agents.messages.tool_data import TOOL_DATA_PART, invalid_tool_data
from pai_agents.messages.types import UIMessageChunk

__all__ = ["CHUNK_FIELDS", "InvalidChunk", "validate_chunk"]


class InvalidChunk(ValueError):
    """A chunk the SDK's chunk schema would reject."""


FINISH_REASONS: Final = frozenset(
    {"stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"}
)
INPUT_ENCODINGS: Final = frozenset({"json", "text"})

# Field specs by chunk type. A name ending in "?" is optional; a kind is a key of _KINDS or,
# with a leading "=", a literal value.
_TOOL_EXTRAS: Final = {
    "providerExecuted?": "bool",
    "providerMetadata?": "pm",
    "toolMetadata?": "object",
    "dynamic?": "bool",
}
_TEXT: Final = {"id": "str", "providerMetadata?": "pm"}
_DELTA: Final = {"id": "str", "delta": "str", "providerMetadata?": "pm"}
_MEDIA: Final = {"url": "str", "mediaType": "str", "providerMetadata?": "pm"}
CHUNK_FIELDS: Final[Mapping[str, Mapping[str, str]]] = {
    "start": {"messageId?": "str", "messageMetadata?": "unknown"},
    "start-step": {},
    "text-start": _TEXT,
    "text-delta": _DELTA,
    "text-end": {**_TEXT, "citations?": "citations"},
    "reasoning-start": _TEXT,
    "reasoning-delta": _DELTA,
    "reasoning-end": _TEXT,
    "custom": {"kind": "str", "providerMetadata?": "pm"},
    "tool-input-start": {
        "toolCallId": "str",
        "toolName": "str",
        "inputEncoding?": "inputEncoding",
        **_TOOL_EXTRAS,
        "title?": "str",
    },
    "tool-input-delta": {"toolCallId": "str", "inputTextDelta": "str"},
    "tool-input-available": {
        "toolCallId": "str",
        "toolName": "str",
        "input": "unknown",
        **_TOOL_EXTRAS,
        "title?": "str",
    },
    "tool-input-error": {
        "toolCallId": "str",
        "toolName": "str",
        "input": "unknown",
        "errorText": "str",
        **_TOOL_EXTRAS,
        "title?": "str",
    },
    "tool-approval-request": {
        "approvalId": "str",
        "toolCallId": "str",
        "approvalDescriptor?": "value",
        "inputSchemaInput?": "unknown",
        "reason?": "str",
        "isAutomatic?": "bool",
        "signature?": "str",
    },
    "tool-approval-response": {
        "approvalId": "str",
        "approved": "bool",
        "reason?": "str",
        "providerExecuted?": "bool",
        "providerMetadata?": "pm",
    },
    "tool-output-available": {
        "toolCallId": "str",
        "output": "unknown",
        **_TOOL_EXTRAS,
        "preliminary?": "bool",
    },
    "tool-output-error": {"toolCallId": "str", "errorText": "str", **_TOOL_EXTRAS},
    "tool-output-denied": {"toolCallId": "str"},
    "source-url": {"sourceId": "str", "url": "str", "title?": "str", "providerMetadata?": "pm"},
    "source-document": {
        "sourceId": "str",
        "mediaType": "str",
        "title": "str",
        "filename?": "str",
        "providerMetadata?": "pm",
    },
    "file": _MEDIA,
    "reasoning-file": _MEDIA,
    "data-": {"id?": "str", "data": "unknown", "transient?": "bool"},
    "steering-message": {"id": "str", "parts": "steeringParts"},
    "message-metadata": {"messageMetadata": "unknown"},
    "finish-step": {},
    "reset-step": {},
    "finish": {"finishReason?": "finishReason", "messageMetadata?": "unknown"},
    "abort": {"reason?": "str"},
    "error": {"errorText": "str"},
}

_URL_SOURCE: Final = {
    "type": "=source",
    "sourceType": "=url",
    "id": "str",
    "url": "str",
    "title?": "str",
    "providerMetadata?": "pm",
}
_DOCUMENT_SOURCE: Final = {
    "type": "=source",
    "sourceType": "=document",
    "id": "str",
    "mediaType": "str",
    "title": "str",
    "filename?": "str",
    "providerMetadata?": "pm",
}
_CITATION: Final = {
    "source": "citationSource",
    "startIndex?": "num",
    "endIndex?": "num",
    "citedText?": "str",
}
_STEERING_TEXT: Final = {"type": "=text", "text": "str", "providerMetadata?": "pm"}
_STEERING_FILE: Final = {
    "type": "=file",
    "mediaType": "str",
    "url": "str",
    "filename?": "str",
    "providerReference?": "strRecord",
    "providerMetadata?": "pm",
}


def _fail(path: str, expected: str) -> str:
    return f"{path} must be {expected}"


def _check_fields(value: Any, fields: Mapping[str, str], path: str) -> str | None:
    """The first problem with an object against a field table, or None."""
    if not isinstance(value, dict):
        return _fail(path, "an object")
    for spec_name, kind in fields.items():
        name = spec_name.rstrip("?")
        optional = spec_name.endswith("?")
        field_path = f"{path}.{name}"
        if name not in value:
            if optional:
                continue
            return f"{field_path} is required"
        item = value[name]
        if kind.startswith("="):  # a literal, such as type: "source"
            if item != kind[1:]:
                return _fail(field_path, repr(kind[1:]))
            continue
        if item is None and kind != "unknown":
            return _fail(field_path, f"{_KIND_NAMES.get(kind, kind)}, not null")
        problem = _KINDS[kind](item, field_path)
        if problem is not None:
            return problem
    return None


def _typed(check: Callable[[Any], bool], expected: str) -> Callable[[Any, str], str | None]:
    return lambda item, path: None if check(item) else _fail(path, expected)


def _provider_metadata(item: Any, path: str) -> str | None:
    if not isinstance(item, dict) or not is_strict_json(item):
        return _fail(path, "an object of JSON objects keyed by provider")
    for provider, options in item.items():
        if not isinstance(options, dict):
            return _fail(f"{path}.{provider}", "a JSON object")
    return None


def _citations(item: Any, path: str) -> str | None:
    if not isinstance(item, list):
        return _fail(path, "an array")
    for index, citation in enumerate(item):
        problem = _check_fields(citation, _CITATION, f"{path}[{index}]")
        if problem is not None:
            return problem
    return None


def _source(item: Any, path: str) -> str | None:
    kind = item.get("sourceType") if isinstance(item, dict) else None
    return _check_fields(item, _DOCUMENT_SOURCE if kind == "document" else _URL_SOURCE, path)


def _steering_parts(item: Any, path: str) -> str | None:
    if not isinstance(item, list):
        return _fail(path, "an array")
    for index, part in enumerate(item):
        kind = part.get("type") if isinstance(part, dict) else None
        fields = _STEERING_FILE if kind == "file" else _STEERING_TEXT
        problem = _check_fields(part, fields, f"{path}[{index}]")
        if problem is not None:
            return problem
    return None


def _is_number(item: Any) -> bool:
    return isinstance(item, int | float) and not isinstance(item, bool) and is_strict_json(item)


def _is_str_record(item: Any) -> bool:
    return isinstance(item, dict) and all(isinstance(v, str) for v in item.values())


_KINDS: Final[Mapping[str, Callable[[Any, str], str | None]]] = {
    "str": _typed(lambda v: isinstance(v, str), "a string"),
    "bool": _typed(lambda v: isinstance(v, bool), "a boolean"),
    "num": _typed(_is_number, "a number"),
    "unknown": _typed(is_strict_json, "strict JSON"),
    "value": _typed(is_strict_json, "strict JSON"),
    "object": _typed(lambda v: isinstance(v, dict) and is_strict_json(v), "a JSON object"),
    "strRecord": _typed(_is_str_record, "an object of strings"),
    "pm": _provider_metadata,
    "citations": _citations,
    "citationSource": _source,
    "steeringParts": _steering_parts,
    "finishReason": _typed(
        lambda v: v in FINISH_REASONS, "one of " + ", ".join(sorted(FINISH_REASONS))
    ),
    "inputEncoding": _typed(lambda v: v in INPUT_ENCODINGS, "'json' or 'text'"),
}
_KIND_NAMES: Final = {"str": "a string", "bool": "a boolean", "num": "a number", "pm": "an object"}


def validate_chunk(chunk: object) -> UIMessageChunk:
    """Return ``chunk`` unchanged if the SDK's chunk schema accepts it, else raise InvalidChunk."""
    if not isinstance(chunk, dict):
        raise InvalidChunk(f"a chunk must be a JSON object, not {type(chunk).__name__}")
    kind = chunk.get("type")
    if not isinstance(kind, str):
        raise InvalidChunk("chunk.type must be a string")
    fields = CHUNK_FIELDS.get("data-" if kind.startswith("data-") else kind)
    if fields is None:
        raise InvalidChunk(f"unknown chunk type {kind!r}")
    problem = _check_fields(chunk, fields, "chunk")
    if problem is None and kind == TOOL_DATA_PART:  # PAI's reserved ToolData record
        problem = invalid_tool_data(chunk)
    elif problem is None and kind == SUSPENSION_PART:  # a stored tool part's suspensions
        problem = invalid_suspension(chunk)
    if problem is not None:
        raise InvalidChunk(f"invalid {kind!r} chunk: {problem}")
    return chunk
