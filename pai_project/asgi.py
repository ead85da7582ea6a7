"""ASGI entry point of the demo site, served by daphne: PAI's ready-made application."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pai_project.settings")

from pai_threads.asgi import application

__all__ = ["application"]
