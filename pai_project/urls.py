from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from pai_threads.views import ChatView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/pai/", include("pai_threads.urls")),
    path("", ChatView.as_view(), name="chat"),
]
