"""Trusted identity: who is calling, resolved by server code, never by the client.

``scope_key`` partitions storage: every query is filtered by it. The resolver is a dotted
path (``PAI["IDENTITY_RESOLVER"]``) to a callable taking the request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest

from pai_threads.conf import pai_settings

__all__ = ["Identity", "resolve_identity", "session_identity"]


@dataclass(frozen=True, kw_only=True)
class Identity:
    scope_key: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.scope_key:
            raise ValueError("Identity.scope_key must not be empty")


def resolve_identity(request: HttpRequest) -> Identity | None:
    resolver = pai_settings.import_path("IDENTITY_RESOLVER")
    identity = resolver(request)
    if identity is not None and not isinstance(identity, Identity):
        raise TypeError("PAI['IDENTITY_RESOLVER'] must return an Identity or None")
    return identity


def session_identity(request: HttpRequest) -> Identity:
    """The demo resolver: the logged-in user, or an anonymous identity per browser session."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return Identity(
            scope_key=f"user:{user.pk}",
            data={"userId": str(user.pk), "username": user.get_username()},
        )
    session = request.session
    if session.session_key is None:
        session.save()
    return Identity(scope_key=f"session:{session.session_key}", data={"anonymous": True})
