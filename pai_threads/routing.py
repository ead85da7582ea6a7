"""Websocket URL patterns: :mod:`pai_threads.asgi` routes them (or add them to your router)."""

from __future__ import annotations

from django.urls import re_path

from pai_threads.websocket.consumers import ThreadConsumer

__all__ = ["websocket_urlpatterns"]

websocket_urlpatterns = [
    re_path(r"^ws/pai/threads/(?P<thread_id>[A-Za-z0-9_-]{1,40})/$", ThreadConsumer.as_asgi()),
]
