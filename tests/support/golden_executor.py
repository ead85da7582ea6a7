"""The executor of the golden servers: the in-process one, each dispatch held until released.

A send, an answered action, a regenerate or a recovery dispatches its run after commit,
while the request that caused it goes on to publish its own events (the committed message,
the run's status, the queue and actions). With the plain in-process executor the run's
first events (its claim announcement) race with those, so their order would differ from run
to run. Here the ``n``-th dispatch of run ``R`` in this process touches ``R.n.held`` in
``$PAI_GOLDEN_GATES``, waits until the test creates ``R.n.go``, executes the run exactly as
:class:`~pai_threads.executors.thread.ThreadExecutor` does, and touches ``R.n.done`` when
the execution has returned (all its events published). Nothing else changes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from pai_threads.execution.execute import aexecute_run
from pai_threads.executors.loop import background_loop
from pai_threads.executors.thread import ThreadExecutor

__all__ = ["GATES_ENV", "GatedExecutor"]

logger = logging.getLogger("pai.golden")

GATES_ENV = "PAI_GOLDEN_GATES"
# A dispatch nobody releases (a broken test) is dropped after this long, not run late.
RELEASE_LIMIT_SECONDS = 120.0


class GatedExecutor(ThreadExecutor):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dispatches: dict[str, int] = {}

    def dispatch(self, run_id: str) -> None:
        with self._lock:
            number = self._dispatches[run_id] = self._dispatches.get(run_id, 0) + 1
        gate = Path(os.environ[GATES_ENV]) / f"{run_id}.{number}"
        _mark(gate, "held").touch()
        future = background_loop().submit(_when_released(run_id, gate))
        future.add_done_callback(lambda f: _report(run_id, f))


async def _when_released(run_id: str, gate: Path) -> None:
    go, done = _mark(gate, "go"), _mark(gate, "done")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RELEASE_LIMIT_SECONDS
    while not go.exists():
        if loop.time() > deadline:
            logger.error("dispatch %s was never released; dropped", gate.name)
            return
        await asyncio.sleep(0.005)
    try:
        await aexecute_run(run_id)
    finally:
        done.touch()


def _mark(gate: Path, state: str) -> Path:
    return gate.parent / f"{gate.name}.{state}"


def _report(run_id: str, future: Future[Any]) -> None:
    exc = future.exception()
    if exc is not None:
        logger.error("run %s crashed in the gated executor", run_id, exc_info=exc)
