"""The chat page: a ready-made browser front end for the thread API and websocket.

Mount it with ``path("", ChatView.as_view())`` (the demo site does); it uses the template
``pai/chat.html`` and the static files under ``pai/``, both shipped inside this app.
"""

from __future__ import annotations

from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.generic import TemplateView

__all__ = ["ChatView"]


@method_decorator(ensure_csrf_cookie, name="dispatch")
class ChatView(TemplateView):
    """The chat page; sets the CSRF cookie its API calls echo back in X-CSRFToken."""

    template_name = "pai/chat.html"
