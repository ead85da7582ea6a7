"""The embedded executor: runs execute on the in-process background loop."""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future
from typing import Any

from asgiref.sync import sync_to_async

from pai_threads.conf import pai_settings
from pai_threads.execution.recovery import Sweeper
from pai_threads.execution.titles import dispatch_in_process
from pai_threads.executors.loop import background_loop
from pai_threads.executors.run_on_loop import run_on_background_loop

__all__ = ["ThreadExecutor", "start_embedded_sweeper"]

logger = logging.getLogger("pai.executors")


class ThreadExecutor:
    """Fine for development and single-process sites: runs live in the server process, so
    a crash leaves them to lease-expiry recovery."""

    def dispatch(self, run_id: str) -> None:
        # Claimed here, on the dispatching thread: the loop starts the engine at once.
        future = run_on_background_loop(run_id)
        future.add_done_callback(lambda f: _report(run_id, f))

    def dispatch_title(self, thread_id: str, run_id: str) -> None:
        """A thread title job after a completed run: a task on the same loop."""
        dispatch_in_process(thread_id, run_id)


def _report(run_id: str, future: Future[Any]) -> None:
    exc = future.exception()
    if exc is not None:
        logger.error(
            "run %s crashed in the thread executor", run_id, exc_info=exc, extra={"run_id": run_id}
        )


_sweeper_started = threading.Event()


def start_embedded_sweeper(interval: float | None = None) -> None:
    """Run the sweeper inside this process (the embedded default has no Celery beat).

    Called once by the site's ASGI entry point, so a restarted dev server resumes the runs
    its previous process left behind. A failed sweep (the database is away) is logged and
    retried with backoff (:class:`~pai_threads.execution.recovery.Sweeper`); the loop never ends.
    """
    if _sweeper_started.is_set():
        return
    _sweeper_started.set()
    every = interval or max(pai_settings.LEASE_SECONDS / 2, 1.0)
    background_loop().submit(_sweep_forever(every))


async def _sweep_forever(every: float) -> None:
    sweeper = Sweeper(every)
    while True:
        try:
            await sync_to_async(sweeper.sweep, thread_sensitive=False)()
        except Exception:  # Sweeper.sweep logs its own failures; this is a last resort
            logger.exception("the embedded sweeper failed; retrying")
        await asyncio.sleep(sweeper.next_delay())
