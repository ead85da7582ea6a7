"""The production executor: one Celery task per run, on workers reading Redis.

Dispatching happens after the run's transaction committed, so it never fails the caller: a
message the broker refuses waits in an :class:`~pai_threads.executors.outbox.Outbox` and goes
out as soon as the broker is back (see docs/durability.md, "Service outages").
"""

from __future__ import annotations

from pai_threads.executors.outbox import Outbox

__all__ = ["CeleryExecutor"]


class CeleryExecutor:
    def __init__(self) -> None:
        self.outbox = Outbox()

    def dispatch(self, run_id: str) -> None:
        from pai_threads.tasks import execute_run

        # Celery's own publish retries (task_publish_retry_policy, about half a second) replace
        # a pooled connection that died with a broker restart; the outbox takes over after.
        self.outbox.send(f"run {run_id}", lambda: execute_run.delay(run_id))

    def dispatch_title(self, thread_id: str, run_id: str) -> None:
        """A thread title job after a completed run: a task of its own."""
        from pai_threads.tasks import generate_thread_title

        self.outbox.send(
            f"title of {run_id}", lambda: generate_thread_title.delay(thread_id, run_id)
        )

    def pending(self) -> int:
        """Dispatches waiting for the broker."""
        return len(self.outbox)

    def flush(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for waiting dispatches; returns how many are left."""
        return self.outbox.flush(timeout)
