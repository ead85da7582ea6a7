"""PAI's ASGI entry point: Django over HTTP, PAI's websockets, PAI's background services.

A project adopts it whole with ``ASGI_APPLICATION = "pai_threads.asgi.application"`` (what
``runserver`` serves when ``daphne`` is first in ``INSTALLED_APPS``), or serves it with
``daphne pai_threads.asgi:application`` (``DJANGO_SETTINGS_MODULE`` set). A project with its
own Channels routing composes the pieces instead::

    django_asgi_app = get_asgi_application()  # Django first: the pieces import models

    from pai_threads.asgi import start_background_services, websocket_application

    start_background_services()
    application = ProtocolTypeRouter(
        {"http": django_asgi_app, "websocket": websocket_application(my_websocket_routes)}
    )

Importing this module starts nothing: ``application`` is built (and the services started) on
first access, so the pieces can be imported on their own.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django.core.handlers.asgi import ASGIHandler

__all__ = ["application", "get_application", "start_background_services", "websocket_application"]

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


def websocket_application(extra_urlpatterns: Sequence[Any] = ()) -> ASGIApp:
    """PAI's websocket routes (plus ``extra_urlpatterns``, the project's own), behind the
    session and auth middleware (the identity resolver's inputs) and an Origin check against
    ``ALLOWED_HOSTS`` (browsers send cookies on cross-site websockets)."""
    from channels.auth import AuthMiddlewareStack
    from channels.routing import URLRouter
    from channels.security.websocket import AllowedHostsOriginValidator

    from pai_threads.routing import websocket_urlpatterns

    routes = [*websocket_urlpatterns, *extra_urlpatterns]
    app: ASGIApp = AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(routes)))
    return app


def start_background_services() -> None:
    """Start what a web process runs for PAI: the garbage-collector tuning of
    ``PAI["GC_TUNING"]`` (:mod:`pai_threads.executors.gc_tuning`: start-up's objects frozen,
    so full collections stop stalling the event loop), and with ``PAI["EXECUTOR"] == "thread"`` the
    embedded recovery sweeper, so a restarted server resumes the runs its previous process
    left behind (Celery's beat runs the sweeper instead). Idempotent."""
    from pai_threads.conf import pai_settings
    from pai_threads.executors.gc_tuning import tune_gc
    from pai_threads.executors.thread import start_embedded_sweeper

    tune_gc()
    if pai_settings.EXECUTOR == "thread":
        start_embedded_sweeper()


def get_application(http: ASGIApp | None = None) -> ASGIApp:
    """The whole site: ``http`` (default: Django's handler, plus static files in ``DEBUG``)
    and PAI's websockets; starts the background services, and under daphne leaves request
    bodies to Django (:func:`pai_threads.api.daphne_bodies.defer_body_parsing_to_django`)."""
    from django.core.asgi import get_asgi_application

    django_app = get_asgi_application()  # sets Django up before anything imports models
    from channels.routing import ProtocolTypeRouter

    from pai_threads.api.daphne_bodies import defer_body_parsing_to_django

    # Before daphne accepts connections: malformed uploads reach the API's typed errors
    # instead of Twisted's bare 400.
    defer_body_parsing_to_django()
    start_background_services()
    return ProtocolTypeRouter(
        {"http": http or _http_application(django_app), "websocket": websocket_application()}
    )


def _http_application(django_app: ASGIHandler) -> ASGIApp:
    """Django's handler; in ``DEBUG`` with staticfiles, serving static files too, as
    ``runserver`` does (so ``daphne`` alone serves the chat page's scripts in development)."""
    from django.apps import apps
    from django.conf import settings

    if settings.DEBUG and apps.is_installed("django.contrib.staticfiles"):
        from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

        static_app: ASGIApp = ASGIStaticFilesHandler(django_app)
        return static_app
    return django_app


_lock = threading.Lock()
_application: ASGIApp | None = None
application: ASGIApp  # bound lazily: see __getattr__


def __getattr__(name: str) -> Any:
    """``application``, built once on first access (PEP 562)."""
    global _application
    if name != "application":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _lock:
        if _application is None:
            _application = get_application()
        return _application
