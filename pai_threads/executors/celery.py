"""The production executor: one Celery task per run, on workers reading Redis."""

from __future__ import annotations

__all__ = ["CeleryExecutor"]


class CeleryExecutor:
    def dispatch(self, run_id: str) -> None:
        from pai_threads.tasks import execute_run

        execute_run.delay(run_id)
