from __future__ import annotations

from django.apps import AppConfig


class PaiThreadsConfig(AppConfig):
    name = "pai_threads"
    verbose_name = "PAI threads"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from pai_threads import checks  # noqa: F401  (registers system checks)
