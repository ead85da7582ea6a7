"""One error shape for everything under ``/api/pai/``:
``{"error": {"code": ..., "message": ..., "details"?: ...}}`` with a JSON content type.

:func:`describe` (:mod:`pai_threads.events.errors`, shared with the websocket's error
frames) turns any exception into that shape (typed service errors, Django's and
django-ninja's request errors, a database outage, anything else), so every surface (the
JSON API, the AI SDK endpoint, websocket commands) reports one way. :func:`json_errors`
wraps a Django view so that neither an exception nor a non-JSON error response (Django's
405, an HTML 400) leaves it. A 500 logs the exception and says nothing about it, in
``DEBUG`` too; a database outage is 503 ``service_unavailable`` with ``Retry-After``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from inspect import iscoroutinefunction
from typing import Any, cast

from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from pai_threads.events.errors import (
    SERVER_ERROR,
    STATUS_CODES,
    ErrorInfo,
    describe,
    status_info,
)

__all__ = [
    "STATUS_CODES",
    "ErrorInfo",
    "describe",
    "error_response",
    "exception_response",
    "json_errors",
    "unknown_endpoint",
]


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
        message = SERVER_ERROR
    return error_response(status_info(response.status_code, message), allow=allow)


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
    return error_response(status_info(404, f"No API endpoint at {request.path}."))
