"""Include with ``path("api/pai/", include("pai_threads.urls"))``."""

from __future__ import annotations

from django.urls import path

from pai_threads.api import api

urlpatterns = [path("", api.urls)]
