"""The Celery app of the demo site (used when PAI["EXECUTOR"] == "celery")."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pai_project.settings")

app = Celery("pai_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
