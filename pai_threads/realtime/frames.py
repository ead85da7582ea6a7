"""Client frames of the thread websocket: parsing, and the one typed error frame.

Every failure a client can cause is answered with :func:`error_frame`, whose ``error`` object
is the HTTP API's error body (``{"code", "message", "details"?}``), so one client-side
handler serves both surfaces. :func:`parse_frame` turns raw websocket input into a command
frame or raises :class:`FrameError`; it never lets bad input escape as another exception
(``json.loads`` raises ``RecursionError`` on deep nesting, which a consumer must not die of).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "MAX_FRAME_DEPTH",
    "RETRY_AFTER_SECONDS",
    "FrameError",
    "error_frame",
    "parse_frame",
    "request_id_of",
    "unavailable_frame",
]

Frame = dict[str, Any]

# Deepest nesting of objects/arrays a frame may have. A UIMessage with tool data, metadata
# and client data stays far below it; anything deeper is an attack on parsers downstream.
MAX_FRAME_DEPTH = 64
# What ``service_unavailable`` suggests waiting before a retry (the HTTP API's Retry-After).
RETRY_AFTER_SECONDS = 5


class FrameError(Exception):
    """A frame rejected before any command runs: nothing was read or written."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        request_id: str | int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        self.request_id = request_id

    def frame(self) -> Frame:
        return error_frame(
            self.code, self.message, details=self.details, request_id=self.request_id
        )


def error_frame(
    code: str,
    message: str,
    *,
    details: dict[str, Any] | None = None,
    request_id: str | int | None = None,
) -> Frame:
    """The typed error frame: ``{"type": "error", "error": {...}, "requestId"?}``.

    ``code`` and ``message`` are repeated at the top level for clients written against the
    first protocol version, which read them there.
    """
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    frame: Frame = {"type": "error", "error": error, "code": code, "message": message}
    if request_id is not None:
        frame["requestId"] = request_id
    return frame


def unavailable_frame(request_id: str | int | None = None) -> Frame:
    """A dependency (database, Redis) is down: nothing was done; retry after a while."""
    return error_frame(
        "service_unavailable",
        "The service is temporarily unavailable; retry shortly.",
        details={"retryAfter": RETRY_AFTER_SECONDS},
        request_id=request_id,
    )


def request_id_of(frame: Frame) -> str | int | None:
    """The frame's ``requestId`` if it has a usable one (a string or an integer)."""
    value = frame.get("requestId")
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_frame(text_data: str | None, bytes_data: bytes | None, *, limit: int) -> Frame:
    """The command frame in one websocket message, or :class:`FrameError`."""
    if text_data is None:
        raise FrameError("invalid_frame", "Frames must be JSON text, not binary.")
    size = len(text_data.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise FrameError(
            "frame_too_large",
            f"Frames must be at most {limit} bytes.",
            details={"limit": limit, "size": size},
        )
    try:
        frame = json.loads(text_data, parse_constant=_reject_constant)
    except RecursionError:
        raise _too_deep() from None
    except ValueError:
        raise FrameError("invalid_json", "The frame is not valid JSON.") from None
    if not isinstance(frame, dict):
        raise FrameError("invalid_frame", "A frame is a JSON object with a string 'type'.")
    request_id = request_id_of(frame)
    _check_values(frame, request_id)
    if not isinstance(frame.get("type"), str):
        raise FrameError(
            "invalid_frame",
            "A frame is a JSON object with a string 'type'.",
            request_id=request_id,
        )
    if frame.get("requestId") is not None and request_id is None:
        raise FrameError("invalid_frame", "'requestId' must be a string or an integer.")
    return frame


def _too_deep(request_id: str | int | None = None) -> FrameError:
    return FrameError(
        "invalid_input",
        f"The frame is nested more than {MAX_FRAME_DEPTH} levels deep.",
        details={"maxDepth": MAX_FRAME_DEPTH},
        request_id=request_id,
    )


def _check_values(frame: Frame, request_id: str | int | None) -> None:
    """Depth and text checks over the whole frame, iteratively (no recursion to exhaust).

    NUL characters and unpaired surrogates (``"\\u0000"``, ``"\\ud800"`` are valid JSON
    escapes) cannot be stored: PostgreSQL refuses NUL in text and JSON, and no database
    driver encodes a lone surrogate. They are refused here, in keys and values alike.
    """
    stack: list[tuple[Any, int]] = [(frame, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            items: list[Any] = [*value.keys(), *value.values()]
        elif isinstance(value, list):
            items = value
        else:
            continue
        if depth > MAX_FRAME_DEPTH:
            raise _too_deep(request_id)
        for item in items:
            if isinstance(item, str):
                _check_text(item, request_id)
            elif isinstance(item, dict | list):
                stack.append((item, depth + 1))


def _check_text(text: str, request_id: str | int | None) -> None:
    if "\x00" in text:
        raise FrameError(
            "invalid_input",
            "Text must not contain NUL (U+0000) characters.",
            request_id=request_id,
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise FrameError(
            "invalid_input",
            "Text must be valid Unicode (no unpaired surrogates).",
            request_id=request_id,
        ) from None
