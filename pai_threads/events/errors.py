"""What a client is told about a failure, on every surface.

:func:`describe` turns any exception into an :class:`ErrorInfo` (typed service errors,
Django's and django-ninja's request errors, a database outage, anything else): the HTTP
API's error envelope (:mod:`pai_threads.api.envelope`) and the websocket's error frame
(:mod:`pai_threads.websocket.frames`) both render it, so every surface reports one way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import (
    BadRequest as DjangoBadRequest,
)
from django.core.exceptions import (
    PermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
)
from django.db import DataError, InterfaceError, OperationalError
from django.http import Http404, UnreadablePostError
from django.http.multipartparser import MultiPartParserError
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError

from pai_threads.errors import PaiError, ServiceUnavailable

__all__ = ["SERVER_ERROR", "STATUS_CODES", "ErrorInfo", "describe", "status_info"]

logger = logging.getLogger("pai.api")

# The code of an error that only has a status (Django's 405, an HTML 400, ninja's HttpError).
STATUS_CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    429: "too_many_requests",
    500: "server_error",
    503: "service_unavailable",
}
SERVER_ERROR = "An unexpected error occurred; it was logged for the operators."


@dataclass(frozen=True, kw_only=True)
class ErrorInfo:
    status: int
    code: str
    message: str
    details: Any = None
    retry_after: int | None = None

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error}


def status_info(status: int, message: str) -> ErrorInfo:
    return ErrorInfo(status=status, code=STATUS_CODES.get(status, "error"), message=message)


def _validation_details(exc: NinjaValidationError) -> list[dict[str, Any]]:
    return [
        {
            "loc": [str(p) for p in e.get("loc", ())],
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in exc.errors
    ]


def describe(exc: BaseException) -> ErrorInfo:
    """The error a client gets for ``exc``; logs what the operators need to see."""
    if isinstance(exc, PaiError):
        retry = exc.retry_after if isinstance(exc, ServiceUnavailable) else None
        details = getattr(exc, "details", None)  # e.g. a command's input errors
        return ErrorInfo(
            status=exc.status,
            code=exc.code,
            message=exc.message,
            details=details,
            retry_after=retry,
        )
    if isinstance(exc, NinjaValidationError):
        return ErrorInfo(
            status=422,
            code="invalid_input",
            message="The request does not match the schema.",
            details=_validation_details(exc),
        )
    if isinstance(exc, AuthenticationError):
        return status_info(401, "Authentication required.")
    if isinstance(exc, HttpError):
        if isinstance(exc.__cause__, PaiError):  # e.g. the body parser's typed error
            return describe(exc.__cause__)
        return status_info(exc.status_code, str(exc))
    if isinstance(exc, RequestDataTooBig):
        return status_info(413, "The request body is too large.")
    if isinstance(exc, MultiPartParserError | UnreadablePostError):
        return status_info(400, f"The multipart body cannot be read: {exc}")
    if isinstance(exc, SuspiciousOperation | DjangoBadRequest):
        return status_info(400, "The request cannot be read.")
    if isinstance(exc, PermissionDenied):
        return status_info(403, "Forbidden.")
    if isinstance(exc, Http404):
        return status_info(404, "Not found.")
    if isinstance(exc, OperationalError | InterfaceError):
        logger.warning("database unavailable: %s", exc, exc_info=exc)
        return describe(ServiceUnavailable())
    if isinstance(exc, DataError):
        # A value the database refuses (the input checks should have caught it first).
        logger.warning("the database refused a value: %s", exc, exc_info=exc)
        return status_info(422, "A value in the request cannot be stored.")
    logger.error("unhandled error in the PAI API", exc_info=exc)
    return status_info(500, SERVER_ERROR)
