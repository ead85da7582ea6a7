"""ASGI entry point, served by daphne: HTTP through Django, websockets through Channels."""

from __future__ import annotations

import os

from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pai_project.settings")

django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (after Django setup)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from pai_threads.conf import pai_settings  # noqa: E402
from pai_threads.executors.thread import start_embedded_sweeper  # noqa: E402
from pai_threads.routing import websocket_urlpatterns  # noqa: E402

if pai_settings.EXECUTOR == "thread":
    start_embedded_sweeper()

# The demo serves its own static files in DEBUG; production puts them behind the web server.
http_app = ASGIStaticFilesHandler(django_asgi_app) if settings.DEBUG else django_asgi_app

# Websockets: the session and user from the cookies (the identity resolver's inputs), and an
# Origin check against ALLOWED_HOSTS, since browsers send cookies cross-site on websockets.
application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
