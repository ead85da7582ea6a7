"""Helpers of the durable-run acceptance tests: worker fleets, bounded waits, transcript checks.

Every wait is bounded and fails with the state it was waiting on plus the worker logs, so a
hung run says why instead of timing out the whole suite.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection
from django.test import override_settings

from pai_threads.models import Message, Run
from tests.support import durable_settings
from tests.support.workers import (
    CeleryWorker,
    celery_broker,
    database_url_from_settings,
    worker_env,
)

__all__ = [
    "TERMINAL",
    "WorkerFleet",
    "assert_transcript_integrity",
    "celery_dispatch",
    "durable_pai",
    "logs",
    "start_workers",
    "transcript",
    "wait_until",
]

T = TypeVar("T")
TERMINAL = frozenset({"completed", "failed", "cancelled", "blocked"})


def durable_pai(executor: str) -> dict[str, Any]:
    """The test process's PAI settings: the durable agents, with ``executor``."""
    return {**settings.PAI, **durable_settings.PAI, "EXECUTOR": executor}


@contextlib.contextmanager
def celery_dispatch(redis_url: str, pai: dict[str, Any] | None = None) -> Iterator[None]:
    """This process dispatches runs to Celery workers on ``redis_url``, with ``pai`` as its
    PAI settings (default: the durable agents)."""
    from kombu import pools

    from pai_project.celery import app

    # celery_broker closes the app's connection pool on exit, but kombu keeps the closed pool
    # registered under the broker URL: a second use in this process would get it back
    # ("Acquire on closed pool"). Dropping kombu's pool registry on both sides avoids that.
    pools.reset()
    try:
        with override_settings(PAI=pai or durable_pai("celery")), celery_broker(app, redis_url):
            yield
    finally:
        pools.reset()


class WorkerFleet:
    """Workers started one after another (``start()``) on the test database and Redis, with
    the settings module ``settings_module``; ``stop()`` stops them and saves their logs."""

    def __init__(self, redis_url: str, log_dir: Path, *, settings_module: str, name: str) -> None:
        self.env = worker_env(
            database_url=database_url_from_settings(connection.settings_dict),
            redis_url=redis_url,
            DJANGO_SETTINGS_MODULE=settings_module,
        )
        self.log_dir = log_dir
        self.name = name
        self.workers: list[CeleryWorker] = []

    def start(self) -> CeleryWorker:
        index = len(self.workers)
        worker = CeleryWorker(
            env=self.env,
            concurrency=1,
            name=f"{self.name}-{index}-{os.getpid()}@%h",
            log_path=self.log_dir / f"worker-{index}.log",
        )
        self.workers.append(worker)
        worker.start()
        worker.wait_ready(timeout=60)
        return worker

    def stop(self) -> None:
        for index, worker in enumerate(self.workers):
            worker.stop()
            worker.save_log(os.environ.get("PAI_ARTIFACTS_DIR"), f"{self.name}-worker-{index}.log")


def start_workers(
    count: int, *, redis_url: str, log_dir: Path, concurrency: int = 1, **env: str
) -> list[CeleryWorker]:
    """Start ``count`` Celery workers on the test database, in parallel; wait until ready.

    ``concurrency=1`` with acks_late and prefetch 1 means a worker busy with a run takes no
    other task, so a test knows which worker executes what.
    """
    base = worker_env(
        database_url=database_url_from_settings(connection.settings_dict),
        redis_url=redis_url,
        DJANGO_SETTINGS_MODULE="tests.support.durable_settings",
        **env,
    )
    workers = [
        CeleryWorker(
            env=base,
            concurrency=concurrency,
            name=f"durable-{i}-{os.getpid()}@%h",
            log_path=log_dir / f"worker-{i}.log",
        )
        for i in range(count)
    ]
    for worker in workers:
        worker.start()
    try:
        with ThreadPoolExecutor(len(workers)) as pool:
            list(pool.map(lambda w: w.wait_ready(timeout=60), workers))
    except BaseException:
        stop_workers(workers)
        raise
    return workers


def stop_workers(workers: Sequence[CeleryWorker]) -> None:
    for index, worker in enumerate(workers):
        worker.stop()
        worker.save_log(os.environ.get("PAI_ARTIFACTS_DIR"), f"durable-worker-{index}.log")


def logs(workers: Sequence[CeleryWorker], tail: int = 6000) -> str:
    return "\n".join(
        f"----- worker {i} (pid {w.process.pid if w.process else '-'}) -----\n"
        f"{w.log_text()[-tail:]}"
        for i, w in enumerate(workers)
    )


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    workers: Sequence[CeleryWorker] = (),
    interval: float = 0.05,
) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` and the logs."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what}\n{logs(workers)}"
            )
        time.sleep(interval)


def wait_terminal(
    run_id: str, *, timeout: float = 30.0, workers: Sequence[CeleryWorker] = ()
) -> Run:
    def probe() -> Run | None:
        run = Run.objects.get(pk=run_id)
        return run if run.status in TERMINAL else None

    return wait_until(
        probe,
        timeout=timeout,
        what=f"run {run_id} to end (now {Run.objects.get(pk=run_id).status})",
        workers=workers,
    )


def transcript(thread_id: str) -> list[tuple[str, str, str, list[Any]]]:
    """(message id, role, status, parts) of the thread's transcript, in order."""
    return [
        (m.message_id, m.role, m.status, m.parts)
        for m in Message.objects.filter(thread_id=thread_id, in_transcript=True).order_by("id")
    ]


def tool_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in parts if p["type"].startswith("tool-") or p["type"] == "dynamic-tool"]


FINAL_TOOL_STATES = frozenset({"output-available", "output-error", "output-denied"})


def assert_transcript_integrity(thread_id: str) -> list[Message]:
    """No duplicate and no open message; every tool part final; one message per run step."""
    rows = list(Message.objects.filter(thread_id=thread_id, in_transcript=True).order_by("id"))
    ids = [m.message_id for m in rows]
    assert len(ids) == len(set(ids)), f"duplicate messages: {ids}"
    open_rows = [m.message_id for m in rows if m.status != Message.Status.COMMITTED]
    assert not open_rows, f"messages left open: {open_rows}"
    for row in rows:
        for part in tool_parts(row.parts):
            assert part.get("state") in FINAL_TOOL_STATES, f"unsettled tool part: {part}"
    steps = [(m.run_id, m.step_index) for m in rows if m.step_index is not None]
    assert len(steps) == len(set(steps)), f"two messages for one step: {steps}"
    for run in Run.objects.filter(thread_id=thread_id):
        indexes = sorted(
            m.step_index for m in rows if m.run_id == run.id and m.step_index is not None
        )
        if run.status == Run.Status.COMPLETED:
            assert indexes == list(range(run.step_count)), (
                f"run {run.id}: step messages {indexes}, step_count {run.step_count}"
            )
    return rows


def text_of(parts: list[dict[str, Any]]) -> str:
    return "".join(p.get("text", "") for p in parts if p["type"] == "text")
