"""W3, concurrency: W1 on 50 threads at once, in one process and through Celery.

(a) In-process: the 50 runs are sent first (dispatch off), then ``asyncio.gather`` of their
``aexecute_run`` on the driver's one event loop: the engine and ORM store driven directly.
(b) Production executor: a real ``celery worker --pool threads --concurrency 50`` process on
Redis and the same database; the driver sends with dispatch on and waits until every run
has finished. The end time is the runs' latest ``finished_at`` (written by the worker, same
machine clock), so polling granularity does not inflate it. Peak memory is the worker's
``VmHWM`` (psutil is not a dependency).
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.stats import spread
from benchmarks.workloads.common import Bench

__all__ = ["run"]

AGENT = "bench_w1"
TIMEOUT = 120.0


def _sizes(bench: Bench) -> tuple[int, int]:
    """(concurrent runs, repetitions)."""
    return (5, 1) if bench.quick else (50, bench.reps(3))


def _in_process(bench: Bench, concurrent: int, reps: int) -> dict[str, Any]:
    seconds: list[float] = []
    bench.execute_all([bench.send(bench.new_thread(AGENT)) for _ in range(concurrent)])  # warm
    for _ in range(reps):
        run_ids = [bench.send(bench.new_thread(AGENT)) for _ in range(concurrent)]
        t0 = time.perf_counter()
        bench.execute_all(run_ids)
        seconds.append(time.perf_counter() - t0)
    return _summary(concurrent, seconds)


def _summary(concurrent: int, seconds: list[float]) -> dict[str, Any]:
    return {
        "concurrent": concurrent,
        "seconds": spread(seconds),
        "runs_per_second": spread([concurrent / s for s in seconds]),
        "repetitions": len(seconds),
    }


def _proc_status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def _wait_all(run_ids: list[str], worker: Any) -> datetime:
    """Block until every run is terminal; return the latest ``finished_at``."""
    from django.db.models import Max

    from pai_threads.models import Run

    deadline = time.monotonic() + TIMEOUT
    runs = Run.objects.filter(id__in=run_ids)
    while runs.filter(status__in=Run.ACTIVE).exists():
        if not worker.is_alive():
            raise RuntimeError(f"celery worker died\n{worker.log_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"W3: runs not done after {TIMEOUT}s\n{worker.log_text()[-4000:]}")
        time.sleep(0.05)
    failed = runs.exclude(status="completed").count()
    if failed:
        raise RuntimeError(f"W3: {failed} runs did not complete\n{worker.log_text()[-4000:]}")
    latest = runs.aggregate(latest=Max("finished_at"))["latest"]
    assert latest is not None
    return latest


def _celery(bench: Bench, concurrent: int, reps: int) -> dict[str, Any]:
    from tests.support.workers import CeleryWorker, worker_env

    assert bench.redis_url
    env = worker_env(
        database_url=bench.database_url,
        redis_url=bench.redis_url,
        DJANGO_SETTINGS_MODULE="benchmarks.settings",
        PAI_LOG_LEVEL="WARNING",
    )
    worker = CeleryWorker(env=env, concurrency=concurrent, loglevel="info")
    worker.start()
    try:
        worker.wait_ready(timeout=60)
        warm = [bench.send(bench.new_thread(AGENT), dispatch=True) for _ in range(concurrent)]
        _wait_all(warm, worker)
        idle_rss_kb = _proc_status_kb(worker.pid, "VmRSS")
        seconds: list[float] = []
        send_seconds: list[float] = []
        for _ in range(reps):
            threads = [bench.new_thread(AGENT) for _ in range(concurrent)]
            start = time.time()
            run_ids = [bench.send(t, dispatch=True) for t in threads]
            send_seconds.append(time.time() - start)
            latest = _wait_all(run_ids, worker)
            seconds.append(latest.timestamp() - start)
        peak_kb = _proc_status_kb(worker.pid, "VmHWM")
    finally:
        worker.stop()
        worker.log_path.unlink(missing_ok=True)
    out = _summary(concurrent, seconds)
    out.update(
        send_seconds=spread(send_seconds),
        worker_peak_rss_mb=peak_kb / 1024,
        worker_rss_after_warmup_mb=idle_rss_kb / 1024,
        pool="threads",
        pool_concurrency=concurrent,
    )
    return out


def run(bench: Bench) -> dict[str, Any]:
    concurrent, reps = _sizes(bench)
    result: dict[str, Any] = {"in_process": _in_process(bench, concurrent, reps)}
    if bench.redis_url:
        result["celery"] = _celery(bench, concurrent, reps)
    else:
        result["celery"] = None
        bench.notes.append("W3 (b) skipped: no Redis (set PAI_TEST_REDIS_URL or use --db postgres)")
    result["cpu_count"] = os.cpu_count()
    return result
