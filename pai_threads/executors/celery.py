"""The production executor: one Celery task per run, on workers reading Redis."""

from __future__ import annotations

__all__ = ["CeleryExecutor"]


class CeleryExecutor:
    def dispatch(self, run_id: str) -> None:
        from pai_threads.tasks import execute_run

        execute_run.delay(run_id)

    def dispatch_title(self, thread_id: str, run_id: str) -> None:
        """A thread title job after a completed run: a task of its own."""
        from pai_threads.tasks import generate_thread_title

        generate_thread_title.delay(thread_id, run_id)
