"""W4/W5 machinery: a real server on loopback, real websocket clients, per-delta latency.

*Arrangements* (the processes that serve the websockets and execute the runs):

- ``embedded``: one ``daphne`` process (``pai_project.asgi`` with ``benchmarks.settings``),
  the in-process thread executor (one background asyncio loop) and the in-memory channel
  layer and replay buffer. Delivery and execution share one process (and one GIL).
- ``celery``: the production arrangement. ``daphne`` serves the websockets; one
  ``celery worker --pool threads`` process executes the runs on its background loop; the
  channel layer and the replay buffer are on Redis.

*Clients* run in the benchmark driver's process: one ``websockets`` connection per thread,
authenticated like a browser (the session cookie of ``GET /api/pai/session``; the threads
are created for that session's identity directly in the database). Each client waits for
``synced``, sends ``{"type": "send", "text": ...}`` asking :class:`benchmarks.agents.
StampedModel` for paced deltas, and for every delta records ``received - yielded``
(delivery, the issue's definition) and ``received - due`` (from the moment the delta was
due, i.e. including any lag of the worker's loop before the model got to yield it), at its
first arrival: a client resynced from a snapshot gets the open message replayed from chunk
index 0 and keeps each delta once (:class:`ClientStream`; the replayed frames are counted apart).
Both stamps travel in the delta text; CLOCK_REALTIME is shared by processes on one machine.

Server resources come from ``/proc/<pid>``: CPU seconds (utime + stime) over the level, RSS
sampled every 0.2 s while it streams, and the process's ``VmHWM``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.agents import stream_request
from benchmarks.profiling import py_spy, start_profile, summarize_profile
from benchmarks.stats import median, percentile
from benchmarks.stream_client import ClientStream
from benchmarks.workloads.common import Bench

__all__ = [
    "ARRANGEMENTS",
    "Level",
    "Serving",
    "arrangements",
    "latency_ms",
    "proc_cpu_seconds",
    "proc_status_kb",
    "py_spy",
    "run_level",
    "serving",
    "start_profile",
    "summarize_profile",
]

ARRANGEMENTS = {
    "embedded": "daphne + in-process thread executor, in-memory channel layer and buffer",
    "celery": "daphne (Redis channel layer and buffer) + Celery worker --pool threads",
}
AGENT = "bench_stream"
CONNECT_PARALLEL = 25  # clients connecting at once (a thundering herd is not the workload)
SEND_BUDGET_S = 0.02  # first guess of the server's time per accepted send, refined per level
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def proc_status_kb(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    return 0


def arrangements(bench: Bench) -> list[str]:
    """Embedded always; the Celery arrangement on PostgreSQL when Redis is available (the
    production stack: SQLite is not shared across processes in production)."""
    names = ["embedded"]
    if bench.redis_url and bench.vendor == "postgresql":
        names.append("celery")
    return names


@dataclass
class Serving:
    arrangement: str
    server: Any  # tests.support.server.DaphneServer
    worker: Any = None  # tests.support.workers.CeleryWorker
    cookie: str = ""
    scope_key: str = ""

    @property
    def executor_pid(self) -> int:
        """The process that executes the runs (the "worker" of W5)."""
        return int(self.worker.pid if self.worker is not None else self.server.process.pid)

    @property
    def pids(self) -> dict[str, int]:
        out = {"server": int(self.server.process.pid)}
        if self.worker is not None:
            out["worker"] = int(self.worker.pid)
        return out

    def check_alive(self) -> None:
        if self.server.process.poll() is not None:
            raise RuntimeError(f"daphne died\n{self.server.log_text()[-4000:]}")
        if self.worker is not None and not self.worker.is_alive():
            raise RuntimeError(f"celery worker died\n{self.worker.log_text()[-4000:]}")


@contextlib.contextmanager
def serving(bench: Bench, arrangement: str, *, worker_concurrency: int = 0) -> Iterator[Serving]:
    """Start the arrangement's processes on the benchmark database; stop them afterwards."""
    import httpx

    from tests.support.server import DaphneServer
    from tests.support.workers import CeleryWorker, worker_env

    env = {"DJANGO_SETTINGS_MODULE": "benchmarks.settings", "PAI_LOG_LEVEL": "WARNING"}
    if arrangement == "celery":
        assert bench.redis_url
        env.update(REDIS_URL=bench.redis_url, PAI_EXECUTOR="celery")
    else:
        env.update(PAI_EXECUTOR="thread")
    server = DaphneServer(database_url=bench.database_url, env=env)
    worker = None
    try:
        server.start(timeout=60)
        if arrangement == "celery":
            wenv = worker_env(
                database_url=bench.database_url,
                redis_url=str(bench.redis_url),
                DJANGO_SETTINGS_MODULE="benchmarks.settings",
                PAI_LOG_LEVEL="WARNING",
            )
            worker = CeleryWorker(env=wenv, concurrency=max(worker_concurrency, 4))
            worker.start()
            worker.wait_ready(timeout=60)
        # A browser's first API call creates its anonymous session (the identity).
        with httpx.Client(base_url=server.url, timeout=10) as http:
            http.get("/api/pai/session").raise_for_status()
            http.get("/api/pai/threads").raise_for_status()
            cookies = dict(http.cookies)
        out = Serving(arrangement=arrangement, server=server, worker=worker)
        out.cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
        out.scope_key = f"session:{cookies['sessionid']}"
        yield out
    finally:
        if worker is not None:
            worker.stop()
            worker.log_path.unlink(missing_ok=True)
        server.stop()
        server.log_path.unlink(missing_ok=True)


@dataclass(kw_only=True)
class Level:
    """One measurement: ``streams`` concurrent runs of ``deltas`` deltas every ``every_ms``."""

    streams: int
    deltas: int
    every_ms: int
    stagger_s: float = 0.0  # stream i starts at start + i / streams * stagger_s


def _new_threads(scope_key: str, count: int) -> list[str]:
    from django.db import close_old_connections

    from pai_threads import services
    from pai_threads.identity import Identity

    identity = Identity(scope_key=scope_key, data={"anonymous": True})
    try:
        return [services.create_thread(identity, agent=AGENT).id for _ in range(count)]
    finally:
        close_old_connections()


async def _client(
    serving: Serving,
    stream: ClientStream,
    level: Level,
    gate: asyncio.Semaphore,
    connected: asyncio.Event,
    go: asyncio.Event,
    counter: list[int],
) -> None:
    from websockets.asyncio.client import connect

    server = serving.server
    url = f"{server.ws_url}/ws/pai/threads/{stream.thread_id}/"
    counted = False

    def count() -> None:
        nonlocal counted
        if not counted:
            counted = True
            counter[0] += 1
            if counter[0] == level.streams:
                connected.set()

    try:
        async with gate:
            ws = await connect(
                url,
                origin=server.url,
                additional_headers={"Cookie": serving.cookie},
                max_size=None,
                compression=None,
                open_timeout=60,
            )
        async with ws:
            while '"synced"' not in await ws.recv():
                pass
            count()
            await go.wait()
            text = stream_request(
                deltas=level.deltas, every_ms=level.every_ms, start_ns=stream.start_ns
            )
            await ws.send(json.dumps({"type": "send", "text": text}))
            async for raw in ws:
                assert isinstance(raw, str)
                if stream.take(raw, time.time_ns()):
                    return
    except Exception as exc:  # a refused or dropped connection fails the level, not the run
        stream.error = f"{type(exc).__name__}: {exc}"
    finally:
        count()  # a client that failed to connect must not keep the others waiting


async def _sample_rss(pids: dict[str, int], peaks: dict[str, int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        for name, pid in pids.items():
            with contextlib.suppress(OSError):
                peaks[name] = max(peaks.get(name, 0), proc_status_kb(pid, "VmRSS"))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)


def _peak_concurrency(streams: list[ClientStream]) -> int:
    edges = sorted(
        [(s.first_rx, 1) for s in streams if s.first_rx]
        + [(s.last_rx, -1) for s in streams if s.first_rx]
    )
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


def latency_ms(values: list[int]) -> dict[str, float]:
    """Median, p99 and max in ms of latencies in ns."""
    ms = [v / 1e6 for v in values]
    return {
        "median": median(ms),
        "p99": percentile(ms, 99),
        "max": max(ms) if ms else float("nan"),
    }


async def _profile_streaming(
    pids: dict[str, int], start_ns: int, seconds: float, directory: Path
) -> dict[str, Any]:
    """py-spy (``--gil``: where the CPU goes) on every process while the streams run."""
    await asyncio.sleep(max(0.0, (start_ns - time.time_ns()) / 1e9))
    spies = {
        name: (start_profile(pid, seconds, directory / f"{name}.txt"), directory / f"{name}.txt")
        for name, pid in pids.items()
    }
    out: dict[str, Any] = {}
    for name, (proc, path) in spies.items():
        if proc is None:
            return {}
        await asyncio.to_thread(proc.wait, seconds + 30)
        out[name] = summarize_profile(path)
    return out


async def _run_clients(
    serving: Serving, level: Level, send_budget_s: float, profile_dir: Path | None
) -> dict[str, Any]:
    threads = await asyncio.to_thread(_new_threads, serving.scope_key, level.streams)
    streams = [ClientStream(thread_id=t) for t in threads]
    gate = asyncio.Semaphore(CONNECT_PARALLEL)
    connected, go, stop = asyncio.Event(), asyncio.Event(), asyncio.Event()
    counter = [0]
    t_connect = time.perf_counter()
    tasks = [
        asyncio.create_task(_client(serving, s, level, gate, connected, go, counter))
        for s in streams
    ]
    await asyncio.wait_for(connected.wait(), 60 + level.streams * 0.2)
    connect_s = time.perf_counter() - t_connect
    # Every stream is due to start after all sends are accepted (so the N streams overlap),
    # spread over ``stagger_s`` (so the runs' periodic checkpoints do not all coincide).
    start = time.time_ns() + int((0.3 + level.streams * send_budget_s) * 1e9)
    for i, s in enumerate(streams):
        s.start_ns = start + int(i / level.streams * level.stagger_s * 1e9)
    pids = serving.pids
    cpu0 = {name: proc_cpu_seconds(pid) for name, pid in pids.items()}
    rss0 = {name: proc_status_kb(pid, "VmRSS") for name, pid in pids.items()}
    peaks: dict[str, int] = {}
    sampler = asyncio.create_task(_sample_rss(pids, peaks, stop))
    client_cpu0, t_send = time.process_time(), time.time_ns()
    go.set()
    stream_s = level.deltas * level.every_ms / 1000 + level.stagger_s
    profiler = None
    if profile_dir is not None:
        profiler = asyncio.create_task(_profile_streaming(pids, start, stream_s, profile_dir))
    _done, pending = await asyncio.wait(tasks, timeout=(start - t_send) / 1e9 + stream_s + 60)
    for task in pending:
        task.cancel()
    wall_s = (time.time_ns() - t_send) / 1e9
    client_cpu = time.process_time() - client_cpu0
    stop.set()
    await sampler
    profile = await profiler if profiler is not None else None
    cpu = {name: proc_cpu_seconds(pid) - cpu0[name] for name, pid in pids.items()}
    serving.check_alive()

    delivery = [v for s in streams for v in s.delivery]
    from_due = [v for s in streams for v in s.from_due]
    lag = [v for s in streams for v in s.lag]
    acks = [s.acked_ns for s in streams if s.acked_ns]
    completed = sum(s.status == "completed" for s in streams)
    errors = sorted({s.error or f"run {s.status or 'unfinished'}" for s in streams} - {""})
    errors = [e for e in errors if e != "run completed"]
    late = sum(1 for s in streams if s.first_due and s.first_due - s.start_ns > 1_000_000)
    executor = "worker" if "worker" in pids else "server"
    out: dict[str, Any] = {
        "streams": level.streams,
        "deltas": level.deltas,
        "every_ms": level.every_ms,
        "stagger_s": level.stagger_s,
        "completed": completed,
        # Distinct deltas the clients have (as a client keeps them: a replayed delta once).
        "deltas_received": sum(len(s.seen) for s in streams),
        "deltas_expected": level.streams * level.deltas,
        "delta_frames": sum(s.frames for s in streams),
        "replayed_frames": sum(s.replayed for s in streams),
        "repeated_frames": sum(s.repeated for s in streams),
        "deltas_from_messages": sum(s.from_messages for s in streams),
        "resyncs": sum(s.resyncs for s in streams),
        "resynced_streams": sum(1 for s in streams if s.resyncs),
        "out_of_order": sum(s.disorder for s in streams),
        "step_resets": sum(s.resets for s in streams),
        "errors": errors[:5],
        "delivery_ms": latency_ms(delivery),
        "from_due_ms": latency_ms(from_due),
        "lag_ms": latency_ms(lag),
        "late_starts": late,
        "peak_concurrent_streams": _peak_concurrency(streams),
        "connect_s": connect_s,
        "send_s": (max(acks) - t_send) / 1e9 if acks else float("nan"),
        "wall_s": wall_s,
        "client_cpu_s": client_cpu,
        "cpu_s": cpu,
        "rss_before_mb": {k: v / 1024 for k, v in rss0.items()},
        "rss_peak_mb": {k: v / 1024 for k, v in peaks.items()},
        "hwm_mb": {k: proc_status_kb(pid, "VmHWM") / 1024 for k, pid in pids.items()},
        "executor_process": executor,
        "cpu_s_per_run": cpu[executor] / level.streams,
        "rss_mb_per_run": max(0.0, peaks.get(executor, 0) - rss0[executor]) / 1024 / level.streams,
    }
    out["thread_ids"] = [s.thread_id for s in streams]
    # Every delta arrived at least once, and each stream's chunks in order since its last
    # resync (a snapshot's replay refolds the open message from index 0).
    out["all_delivered"] = completed == level.streams and all(
        len(s.seen) == level.deltas and not s.disorder for s in streams
    )
    if profile:
        out["profile"] = profile
    return out


def run_level(
    bench: Bench,
    serving: Serving,
    level: Level,
    *,
    send_budget_s: float = SEND_BUDGET_S,
    profile_dir: Path | None = None,
) -> dict[str, Any]:
    """Measure one level on a running arrangement (the driver's loop runs the clients);
    with ``profile_dir``, py-spy samples the server processes while the streams run."""
    coroutine = _run_clients(serving, level, send_budget_s, profile_dir)
    result: dict[str, Any] = bench.loop.run(coroutine)
    result["reattempted_runs"] = _reattempted_runs(result.pop("thread_ids", []))
    return result


def _reattempted_runs(thread_ids: list[str]) -> int:
    """Runs of the level's threads claimed more than once (a lease lost and recovered, or a
    resume): why a level may count more deltas than were sent."""
    from django.db import close_old_connections

    from pai_threads.models import Run

    try:
        return Run.objects.filter(thread_id__in=thread_ids, attempt__gt=1).count()
    finally:
        close_old_connections()


def next_send_budget(result: dict[str, Any], current: float) -> float:
    """Seconds per send to plan the next level's start with: what this one took, x1.5."""
    send_s = result.get("send_s")
    if not send_s or send_s != send_s:  # NaN: no ack at all
        return current
    return max(current, 1.5 * send_s / result["streams"])
