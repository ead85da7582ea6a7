"""The caller of a websocket, resolved by the same resolver as the HTTP API.

The configured ``PAI["IDENTITY_RESOLVER"]`` takes a request, so the websocket scope is
presented as one (headers, cookies, and the session and user that ``AuthMiddlewareStack``
put in the scope): the same browser gets the same ``scope_key`` over HTTP and websockets.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from pai_threads.conf import pai_settings
from pai_threads.identity import Identity, resolve_identity, session_identity

__all__ = ["resolve_scope_identity", "scope_request"]


def scope_request(scope: dict[str, Any]) -> HttpRequest:
    """An HttpRequest view of an ASGI websocket scope, enough for identity resolvers."""
    request = HttpRequest()
    request.method = "GET"
    request.path = request.path_info = scope.get("path", "")
    for name, value in scope.get("headers", []):
        key = name.decode("latin1").upper().replace("-", "_")
        key = key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{key}"
        request.META[key] = value.decode("latin1")
    client = scope.get("client") or ("", 0)
    request.META["REMOTE_ADDR"] = client[0]
    request.COOKIES = dict(scope.get("cookies", {}))
    if "session" in scope:
        request.session = scope["session"]
    if "user" in scope:
        request.user = scope["user"]
    return request


def resolve_scope_identity(scope: dict[str, Any]) -> Identity | None:
    """Sync (sessions load from the database): call through ``database_sync_to_async``."""
    request = scope_request(scope)
    if pai_settings.import_path("IDENTITY_RESOLVER") is session_identity:
        # session_identity creates a session for a cookieless browser; a websocket cannot
        # set the cookie, so that identity could never be seen again. Refuse instead.
        user = getattr(request, "user", None)
        session = getattr(request, "session", None)
        authenticated = user is not None and user.is_authenticated
        if not authenticated and (session is None or session.session_key is None):
            return None
    return resolve_identity(request)
