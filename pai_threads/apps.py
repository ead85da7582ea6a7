from __future__ import annotations

from django.apps import AppConfig


class PaiThreadsConfig(AppConfig):
    name = "pai_threads"
    verbose_name = "PAI threads"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from pai_agents.sync_calls import use_sync_runner
        from pai_threads import checks  # noqa: F401  (registers system checks)
        from pai_threads.events.publishing import use_delivery
        from pai_threads.execution import capabilities  # noqa: F401  (capability check)
        from pai_threads.observability import signals  # noqa: F401  (run_queued's receiver)
        from pai_threads.realtime import delivery
        from pai_threads.store.db import run_user_sync

        # Operations publish through the events package; realtime delivers.
        use_delivery(delivery)

        # Sync tools and hooks end like requests: their ORM connections never go stale.
        use_sync_runner(run_user_sync)
