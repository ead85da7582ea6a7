"""Include with ``path("api/pai/", include("pai_threads.urls"))``.

Every response under that prefix that is an error, from any view (an unknown path and a
method not allowed included), uses the envelope of :mod:`pai_threads.api.envelope`.
"""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path, re_path

from pai_threads.ai_sdk.endpoint import cancel, chat, messages, resume_stream
from pai_threads.api import api
from pai_threads.api.envelope import json_errors, unknown_endpoint


def _enveloped(patterns: list[URLPattern | URLResolver]) -> list[URLPattern | URLResolver]:
    """django-ninja's views, each wrapped (its 405 answers are plain text otherwise)."""
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            pattern.callback = json_errors(pattern.callback)
    return patterns


_ninja_patterns, _app_name, _namespace = api.urls

urlpatterns = [
    path("ai-sdk/chat", chat, name="pai-ai-sdk-chat"),
    path("ai-sdk/chat/<str:chat_id>/stream", resume_stream, name="pai-ai-sdk-resume"),
    path("ai-sdk/chat/<str:chat_id>/messages", messages, name="pai-ai-sdk-messages"),
    path("ai-sdk/chat/<str:chat_id>/cancel", cancel, name="pai-ai-sdk-cancel"),
    path("", (_enveloped(_ninja_patterns), _app_name, _namespace)),
    re_path(r"^(?P<path>.*)$", unknown_endpoint, name="pai-api-unknown"),
]
