"""Input checks every entry point shares: the HTTP API, the AI SDK endpoint, websocket
commands and trusted callers all reach the database through the services, which call these.

The rules, the same on every database backend (a thread moves between them unchanged):

* Text is Unicode PostgreSQL can store: no NUL character (``\\u0000``, refused by ``text``
  and ``jsonb``) and no lone surrogate (not encodable as UTF-8). Keys of JSON objects too.
* JSON nests at most :data:`MAX_JSON_DEPTH` levels. :func:`loads` refuses deeper documents
  before Python's parser recurses, so a hostile body is a typed error, not a RecursionError.
* An id is looked up only when it could exist (a string of 1 to 100 characters that passes
  the text rule); anything else is :class:`NotFound`, like a missing row.

A violation raises :class:`InvalidInput` (422), or :class:`BadRequest` (400) for a document
that is not JSON at all; nothing has been stored by then.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pai_agents.ids import new_id
from pai_agents.json import NotStrictJson, ensure_strict_json
from pai_threads.errors import BadRequest, InvalidInput, NotFound

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_JSON_DEPTH",
    "USER_PART_TYPES",
    "check_json",
    "check_text",
    "loads",
    "lookup_id",
    "validate_user_message",
]

MAX_JSON_DEPTH = 64
MAX_ID_LENGTH = 100
USER_PART_TYPES = frozenset({"text", "file", "attachment"})

# Optional string fields of user parts (AI SDK FileUIPart, DataUIPart, PAI attachments).
_OPTIONAL_PART_STRINGS = {"file": ("filename",), "data-": ("id",), "attachment": ("id",)}
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _text_problem(value: str) -> str | None:
    match = _UNSTORABLE.search(value)
    if match is None:
        return None
    if match.group() == "\x00":
        return "must not contain NUL characters (\\u0000)"
    return "must not contain lone surrogates (invalid Unicode)"


def check_text(value: str, what: str) -> str:
    """``value`` unchanged when it is storable text, else :class:`InvalidInput`."""
    problem = _text_problem(value)
    if problem is not None:
        raise InvalidInput(f"{what} {problem}")
    return value


def check_json(value: Any, what: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``value`` unchanged when every string and key in it is storable text and it nests at
    most ``max_depth`` levels. Iterative: a deep value cannot exhaust the stack here."""
    stack: list[tuple[Any, int, str]] = [(value, 0, what)]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            check_text(item, path)
            continue
        if not isinstance(item, dict | list):
            continue
        if depth >= max_depth:
            raise InvalidInput(f"{what} is nested deeper than {max_depth} levels")
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str):
                    check_text(key, f"{path}: a key")
                stack.append((child, depth + 1, f"{path}.{key}"))
        else:
            stack.extend((child, depth + 1, f"{path}[{i}]") for i, child in enumerate(item))
    return value


def loads(raw: bytes | str, what: str = "the body") -> Any:
    """Parse JSON text: :class:`BadRequest` when it is not JSON, :class:`InvalidInput` when
    it nests deeper than :data:`MAX_JSON_DEPTH` (however deep: Python's own limit included)."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise InvalidInput(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError):  # JSONDecodeError is a ValueError
        raise BadRequest(f"{what} is not valid JSON") from None
    _check_depth(value, what)
    return value


def _check_depth(value: Any, what: str) -> None:
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= MAX_JSON_DEPTH:
            raise InvalidInput(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children)


def lookup_id(value: object, what: str) -> str:
    """``value`` when it could name a stored row; else :class:`NotFound` ("<what> not
    found"), exactly what a well-formed but missing id gets."""
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= MAX_ID_LENGTH
        or _text_problem(value) is not None
    ):
        raise NotFound(f"{what} not found")
    return value


def validate_user_message(
    message: Mapping[str, Any],
) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """A user message a client sends: ``(message id, parts, public metadata)``.

    Parts are text, file, attachment or ``data-*`` (``data-pai-*`` is the runtime's,
    MF-011); ``metadata.pai`` is reserved; everything is strict, storable JSON."""
    if message.get("role", "user") != "user":
        raise InvalidInput("only user messages can be sent")
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise InvalidInput("a message needs a non-empty 'parts' list")
    for index, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str) or not (kind in USER_PART_TYPES or kind.startswith("data-")):
            raise InvalidInput(f"parts[{index}]: type must be text, file, attachment or data-*")
        if kind.startswith("data-pai-"):  # MF-011: reserved for the runtime
            raise InvalidInput(f"parts[{index}]: data-pai-* parts are reserved for the runtime")
        if kind == "text" and not isinstance(part.get("text"), str):
            raise InvalidInput(f"parts[{index}]: a text part needs a string 'text'")
        if kind == "file" and not (
            isinstance(part.get("url"), str) and isinstance(part.get("mediaType"), str)
        ):
            raise InvalidInput(f"parts[{index}]: a file part needs 'url' and 'mediaType'")
        if kind == "attachment" and not isinstance(part.get("fileId"), str):
            raise InvalidInput(f"parts[{index}]: an attachment part needs a string 'fileId'")
        for key in _OPTIONAL_PART_STRINGS.get(kind[:5] if kind.startswith("data-") else kind, ()):
            if key in part and not isinstance(part[key], str):
                raise InvalidInput(f"parts[{index}]: '{key}' must be a string")
    metadata = message.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be an object")
    if "pai" in metadata:
        raise InvalidInput("metadata.pai is reserved for the runtime")
    try:
        ensure_strict_json(check_json(parts, "parts"), what="parts")
        ensure_strict_json(check_json(metadata, "metadata"), what="metadata")
    except NotStrictJson as exc:
        raise InvalidInput(str(exc)) from exc
    message_id = message.get("id") or new_id("msg")
    if not isinstance(message_id, str) or not 1 <= len(message_id) <= MAX_ID_LENGTH:
        raise InvalidInput("message id must be a string of 1 to 100 characters")
    return check_text(message_id, "the message id"), parts, metadata
