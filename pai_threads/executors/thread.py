"""The embedded executor: runs execute on the in-process background loop."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any

from pai_threads.executors.loop import background_loop

__all__ = ["ThreadExecutor"]

logger = logging.getLogger("pai.executors")


class ThreadExecutor:
    """Fine for development and single-process sites: runs live in the server process, so
    a crash leaves them to lease-expiry recovery."""

    def dispatch(self, run_id: str) -> None:
        from pai_threads.execute import aexecute_run

        future = background_loop().submit(aexecute_run(run_id))
        future.add_done_callback(lambda f: _report(run_id, f))


def _report(run_id: str, future: Future[Any]) -> None:
    exc = future.exception()
    if exc is not None:
        logger.error(
            "run %s crashed in the thread executor", run_id, exc_info=exc, extra={"run_id": run_id}
        )
