"""Client frames of the thread websocket: parsing, and the one typed error frame.

Every failure a client can cause is answered with :func:`error_frame`, whose ``error`` object
is the HTTP API's error body (``{"code", "message", "details"?}``), so one client-side
handler serves both surfaces; :func:`exception_frame` describes any exception the way the
HTTP API does. :func:`parse_frame` turns raw websocket input into a command frame or raises
:class:`FrameError`; it never lets bad input escape as another exception (``json.loads``
raises ``RecursionError`` on deep nesting, which a consumer must not die of). The text and
depth rules are the service boundary's (:mod:`pai_threads.services.input_guard`).
:func:`encode_frame` is the text of a server frame: ``json.dumps``'s, without its per-call
set-up (one frame per delta per subscriber).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pai_agents.json import prebuilt_dumps, strict_loads
from pai_threads.errors import InvalidInput, ServiceUnavailable
from pai_threads.events.errors import describe
from pai_threads.services.input_guard import MAX_JSON_DEPTH, check_json

__all__ = [
    "MAX_FRAME_DEPTH",
    "FrameError",
    "encode_frame",
    "error_frame",
    "exception_frame",
    "parse_frame",
    "request_id_of",
    "unavailable_frame",
]

Frame = dict[str, Any]

# Deepest nesting of objects/arrays a frame may have: the HTTP API's JSON limit.
MAX_FRAME_DEPTH = MAX_JSON_DEPTH


# json.dumps with its defaults, without its per-call set-up (one frame per delta per subscriber).
encode_frame: Callable[[Any], str] = prebuilt_dumps()


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


def exception_frame(exc: BaseException, request_id: str | int | None = None) -> Frame:
    """The error frame for ``exc``, described exactly as the HTTP API describes it
    (:func:`pai_threads.events.errors.describe`: typed errors keep their code, a database
    outage is ``service_unavailable`` with ``details.retryAfter``, a bug is a logged
    ``server_error``)."""
    info = describe(exc)
    details: dict[str, Any] = {}
    if isinstance(info.details, dict):
        details.update(info.details)
    elif info.details is not None:
        details["errors"] = info.details
    if info.retry_after is not None:
        details["retryAfter"] = info.retry_after
    return error_frame(info.code, info.message, details=details or None, request_id=request_id)


def unavailable_frame(request_id: str | int | None = None) -> Frame:
    """Redis or the database is down: nothing was done; retry after a while."""
    return exception_frame(ServiceUnavailable(), request_id)


def request_id_of(frame: Frame) -> str | int | None:
    """The frame's ``requestId`` if it has a usable one (a string or an integer)."""
    value = frame.get("requestId")
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


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
        frame = strict_loads(text_data)
    except RecursionError:
        message = f"the frame is nested deeper than {MAX_FRAME_DEPTH} levels"
        raise FrameError("invalid_input", message, details={"maxDepth": MAX_FRAME_DEPTH}) from None
    except ValueError:
        raise FrameError("invalid_json", "The frame is not valid JSON.") from None
    if not isinstance(frame, dict):
        raise FrameError("invalid_frame", "A frame is a JSON object with a string 'type'.")
    request_id = request_id_of(frame)
    try:
        # NUL and unpaired surrogates in any key or value (no database stores them; both
        # are valid JSON escapes), and nesting: the service boundary's rules.
        check_json(frame, "the frame", max_depth=MAX_FRAME_DEPTH)
    except InvalidInput as exc:
        raise FrameError(exc.code, exc.message, request_id=request_id) from None
    if not isinstance(frame.get("type"), str):
        raise FrameError(
            "invalid_frame",
            "A frame is a JSON object with a string 'type'.",
            request_id=request_id,
        )
    if frame.get("requestId") is not None and request_id is None:
        raise FrameError("invalid_frame", "'requestId' must be a string or an integer.")
    return frame
