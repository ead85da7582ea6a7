"""Include with ``path("api/pai/", include("pai_threads.urls"))``."""

from __future__ import annotations

from django.urls import path

from pai_threads.api import api
from pai_threads.api.ai_sdk import chat, resume_stream

urlpatterns = [
    path("ai-sdk/chat", chat, name="pai-ai-sdk-chat"),
    path("ai-sdk/chat/<str:chat_id>/stream", resume_stream, name="pai-ai-sdk-resume"),
    path("", api.urls),
]
