"""API authentication: the configured identity resolver, with CSRF for cookie sessions."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from ninja.errors import HttpError
from ninja.security.base import AuthBase
from ninja.utils import check_csrf

from pai_threads.identity import Identity, resolve_identity

__all__ = ["IdentityAuth", "request_identity"]


class IdentityAuth(AuthBase):
    """Resolves :class:`Identity` by trusted server code; never from client-sent fields.

    Requests that carry the session cookie are checked for CSRF, since the browser attaches
    that cookie on its own; token-authenticated clients (no cookie) are not.
    """

    openapi_type = "apiKey"
    openapi_in = "cookie"

    def __init__(self) -> None:
        self.openapi_name = settings.SESSION_COOKIE_NAME
        super().__init__()

    def __call__(self, request: HttpRequest) -> Identity | None:
        has_session_cookie = settings.SESSION_COOKIE_NAME in request.COOKIES
        exempt = getattr(request, "_ninja_csrf_exempt", False)
        if has_session_cookie and not exempt and check_csrf(request):
            raise HttpError(403, "CSRF check failed")
        return resolve_identity(request)


def request_identity(request: HttpRequest) -> Identity:
    """The identity :class:`IdentityAuth` resolved for this request (an operation's caller)."""
    identity = request.auth  # type: ignore[attr-defined]
    assert isinstance(identity, Identity)
    return identity
