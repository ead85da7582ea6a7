"""One error shape for everything under ``/api/pai/``:
``{"error": {"code": ..., "message": ..., "details"?: ...}}`` with a JSON content type.

:func:`describe` turns any exception into that shape (typed service errors, Django's and
django-ninja's request errors, a database outage, anything else), so every surface (the
JSON API, the AI SDK endpoint, websocket commands) reports one way. :func:`json_errors`
wraps a Django view so that neither an exception nor a non-JSON error response (Django's
405, an HTML 400) leaves it. A 500 logs the exception and says nothing about it, in
``DEBUG`` too; a database outage is 503 ``service_unavailable`` with ``Retry-After``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import wraps
from inspect import iscoroutinefunction
from typing import Any, cast

from django.core.exceptions import (
    BadRequest as DjangoBadRequest,
)
from django.core.exceptions import (
    PermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
)
from django.db import DataError, InterfaceError, OperationalError
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    JsonResponse,
    UnreadablePostError,
)
from django.http.multipartparser import MultiPartParserError
from django.views.decorators.csrf import csrf_exempt
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError

from pai_threads.errors import PaiError, ServiceUnavailable

__all__ = [
    "STATUS_CODES",
    "ErrorInfo",
    "describe",
    "error_response",
    "exception_response",
    "json_errors",
    "unknown_endpoint",
]

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
_SERVER_ERROR = "An unexpected error occurred; it was logged for the operators."


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


def _status_info(status: int, message: str) -> ErrorInfo:
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
        return ErrorInfo(status=exc.status, code=exc.code, message=exc.message, retry_after=retry)
    if isinstance(exc, NinjaValidationError):
        return ErrorInfo(
            status=422,
            code="invalid_input",
            message="The request does not match the schema.",
            details=_validation_details(exc),
        )
    if isinstance(exc, AuthenticationError):
        return _status_info(401, "Authentication required.")
    if isinstance(exc, HttpError):
        if isinstance(exc.__cause__, PaiError):  # e.g. the body parser's typed error
            return describe(exc.__cause__)
        return _status_info(exc.status_code, str(exc))
    if isinstance(exc, RequestDataTooBig):
        return _status_info(413, "The request body is too large.")
    if isinstance(exc, MultiPartParserError | UnreadablePostError):
        return _status_info(400, f"The multipart body cannot be read: {exc}")
    if isinstance(exc, SuspiciousOperation | DjangoBadRequest):
        return _status_info(400, "The request cannot be read.")
    if isinstance(exc, PermissionDenied):
        return _status_info(403, "Forbidden.")
    if isinstance(exc, Http404):
        return _status_info(404, "Not found.")
    if isinstance(exc, OperationalError | InterfaceError):
        logger.warning("database unavailable: %s", exc, exc_info=exc)
        return describe(ServiceUnavailable())
    if isinstance(exc, DataError):
        # A value the database refuses (the input checks should have caught it first).
        logger.warning("the database refused a value: %s", exc, exc_info=exc)
        return _status_info(422, "A value in the request cannot be stored.")
    logger.error("unhandled error in the PAI API", exc_info=exc)
    return _status_info(500, _SERVER_ERROR)


def error_response(info: ErrorInfo, allow: str | None = None) -> JsonResponse:
    response = JsonResponse(info.body(), status=info.status)
    if info.retry_after is not None:
        response["Retry-After"] = str(info.retry_after)
    if allow is not None:
        response["Allow"] = allow
    return response


def exception_response(request: HttpRequest, exc: Exception | type[Exception]) -> HttpResponse:
    """A django-ninja exception handler: ``api.add_exception_handler(cls, this)``."""
    return error_response(describe(exc if isinstance(exc, Exception) else exc()))


def _is_json(response: HttpResponseBase) -> bool:
    return str(response.get("Content-Type", "")).startswith("application/json")


def as_envelope(response: HttpResponseBase) -> HttpResponseBase:
    """An error response that is not JSON (Django's 405, an HTML 400) in the envelope."""
    if response.status_code < 400 or response.streaming or _is_json(response):
        return response
    allow = response.get("Allow")
    message = {
        405: f"Method not allowed; allowed: {allow}." if allow else "Method not allowed.",
        404: "Not found.",
    }.get(response.status_code, "The request failed.")
    if response.status_code >= 500:
        message = _SERVER_ERROR
    return error_response(_status_info(response.status_code, message), allow=allow)


View = Callable[..., HttpResponseBase]
AsyncView = Callable[..., Awaitable[HttpResponseBase]]


def json_errors(view: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a Django view (sync or async): exceptions and non-JSON error responses become
    the envelope. Keeps the view's attributes (``csrf_exempt``)."""
    if iscoroutinefunction(view):
        async_view = cast(AsyncView, view)

        @wraps(view)
        async def async_wrapper(
            request: HttpRequest, *args: Any, **kwargs: Any
        ) -> HttpResponseBase:
            try:
                response = await async_view(request, *args, **kwargs)
            except Exception as exc:
                return error_response(describe(exc))
            return as_envelope(response)

        return async_wrapper
    sync_view = cast(View, view)

    @wraps(view)
    def sync_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            response = sync_view(request, *args, **kwargs)
        except Exception as exc:
            return error_response(describe(exc))
        return as_envelope(response)

    return sync_wrapper


@csrf_exempt  # answers 404 to every method; nothing to protect
def unknown_endpoint(request: HttpRequest, path: str = "") -> JsonResponse:
    """Anything under ``/api/pai/`` that names no endpoint."""
    return error_response(_status_info(404, f"No API endpoint at {request.path}."))
