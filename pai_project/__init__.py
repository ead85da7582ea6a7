"""The demo site: settings, URLs, ASGI and Celery apps, and the demo agents."""

from pai_project.celery import app as celery_app

__all__ = ["celery_app"]
