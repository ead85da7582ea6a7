"""TTFT, the time to first token PAI adds: from the HTTP send to the model's request.

A browser-like client (:class:`tests.support.server.Browser`: a session cookie and its CSRF
token) against a real daphne server with the in-process thread executor, the embedded
arrangement of W4 (:func:`benchmarks.streaming.serving`). For every sample it creates a
fresh thread, opens the thread's websocket (as the page showing it would) and waits for
``synced``, then ``POST /api/pai/threads/{id}/messages``. The agent's model
(:class:`benchmarks.agents.FirstTokenModel`) answers with one delta carrying
``time.time_ns()`` taken when the runtime opened its stream; CLOCK_REALTIME is shared by the
processes of one machine, so the client compares it with its own stamps:

- *TTFT added* = model asked - request sent (the issue's target: median <= 10 ms);
- *HTTP* = response received - request sent (``services.send`` and the view);
- *response to model* = model asked - response received: the dispatch after commit, the
  claim and the context load. Negative when the executor reached the model before the
  client had read the response (both race in the server process after the commit);
- *first delta* = delta received on the websocket - model asked (realtime delivery, with the
  runtime's coalescing window);
- *HTTP floor*: an authenticated ``GET /api/pai/threads/{id}`` by the same client just
  before the send (daphne, Django's middleware, the session, one read): what any API call
  costs here, so *HTTP* minus it is roughly the send's own share.

Samples run one at a time, each run finished before the next send. With py-spy installed
(full mode), sends on threads created beforehand, without a websocket, then run for
:data:`PROFILE_SECONDS` under ``py-spy record --gil`` on the server: where its CPU goes
during a send and the run it starts (those times are not the ones reported).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.agents import first_token_stamp
from benchmarks.stats import median, percentile
from benchmarks.streaming import Serving, py_spy, serving, start_profile, summarize_profile
from benchmarks.workloads.common import Bench

__all__ = ["AGENT", "TARGET_MS", "Sample", "run", "summarize"]

AGENT = "bench_ttft"
TARGET_MS = 10.0
TERMINAL = frozenset({"completed", "failed", "cancelled", "waiting"})
PROFILE_SECONDS = 6


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One send's stamps, ``time.time_ns()`` of the client (sent, response, delivered) and of
    the server's model (asked); ``floor``: the ns of the GET just before."""

    sent: int
    response: int
    asked: int
    delivered: int
    floor: int = 0


def _ms(values: list[float]) -> dict[str, float]:
    return {"median": median(values), "p95": percentile(values, 95)}


def summarize(samples: list[Sample]) -> dict[str, Any]:
    """Median and p95 of the TTFT and of its parts, in ms."""
    ttft = [(s.asked - s.sent) / 1e6 for s in samples]
    return {
        "sends": len(samples),
        "median_ms": median(ttft),
        "p95_ms": percentile(ttft, 95),
        "split": {
            "http_ms": _ms([(s.response - s.sent) / 1e6 for s in samples]),
            "response_to_model_ms": _ms([(s.asked - s.response) / 1e6 for s in samples]),
            "http_floor_ms": _ms([s.floor / 1e6 for s in samples]),
        },
        "first_delta_ms": _ms([(s.delivered - s.asked) / 1e6 for s in samples]),
        "model_before_response": sum(s.asked < s.response for s in samples),
    }


def sizes(bench: Bench) -> tuple[int, int]:
    """(warm-up sends, measured sends)."""
    return (2, 5) if bench.quick else (20, 100)


async def _watch(ws: Any, first: dict[str, int]) -> str:
    """Read frames until the run ends: the first text delta's stamp and arrival time."""
    async for raw in ws:
        now = time.time_ns()
        if '"text-delta"' in raw and "delivered" not in first:
            asked = first_token_stamp(raw)
            if asked is not None:
                first.update(delivered=now, asked=asked)
        elif '"run.status"' in raw or '"error"' in raw:
            frame = json.loads(raw)
            if frame.get("type") == "error":
                return f"error {frame.get('code')}: {frame.get('message')}"
            if frame.get("status") in TERMINAL:
                return str(frame["status"])
    return "websocket closed"


async def _one(browser: Any) -> Sample:
    thread_id = await browser.create_thread(agent=AGENT)
    async with browser.websocket(thread_id) as ws:
        while '"synced"' not in await ws.recv():
            pass
        floor = time.time_ns()
        (await browser.api("GET", f"/threads/{thread_id}")).raise_for_status()
        floor = time.time_ns() - floor
        first: dict[str, int] = {}
        watcher = asyncio.create_task(_watch(ws, first))
        sent = time.time_ns()
        await browser.send(thread_id, "When were you asked?")
        response = time.time_ns()
        status = await asyncio.wait_for(watcher, 30)
    if status != "completed" or "asked" not in first:
        raise RuntimeError(f"TTFT: run on {thread_id} ended {status}, first delta {first}")
    return Sample(
        sent=sent,
        response=response,
        asked=first["asked"],
        delivered=first["delivered"],
        floor=floor,
    )


def _wait_run(run_id: str) -> None:
    """Poll the run's row from the driver (no request to the server being profiled)."""
    from django.db import close_old_connections

    from pai_threads.models import Run

    try:
        while Run.objects.values_list("status", flat=True).get(id=run_id) not in TERMINAL:
            time.sleep(0.002)
    finally:
        close_old_connections()


async def _profile_sends(browser: Any, pid: int, directory: Path) -> dict[str, Any] | None:
    """Sends (each run finished before the next) for PROFILE_SECONDS under py-spy."""
    threads = [await browser.create_thread(agent=AGENT) for _ in range(PROFILE_SECONDS * 40)]
    path = directory / "server.txt"
    spy = start_profile(pid, PROFILE_SECONDS, path)
    if spy is None:
        return None
    await asyncio.sleep(0.5)  # py-spy attaches
    deadline, sends = time.monotonic() + PROFILE_SECONDS - 0.5, 0
    for thread_id in threads:
        if time.monotonic() > deadline:
            break
        run_id = (await browser.send(thread_id, "When were you asked?"))["run"]["id"]
        await asyncio.to_thread(_wait_run, run_id)
        sends += 1
    await asyncio.to_thread(spy.wait, PROFILE_SECONDS + 30)
    profile = summarize_profile(path)
    return {"sends": sends, **profile} if profile else None


async def _measure(
    server: Serving, warmup: int, sends: int, profile_dir: Path | None
) -> tuple[list[Sample], dict[str, Any] | None]:
    from tests.support.server import Browser

    async with Browser(server.server) as browser:
        for _ in range(warmup):
            await _one(browser)
        samples = [await _one(browser) for _ in range(sends)]
        profile = None
        if profile_dir is not None:
            profile = await _profile_sends(browser, server.executor_pid, profile_dir)
        return samples, profile


def run(bench: Bench) -> dict[str, Any]:
    warmup, sends = sizes(bench)
    with tempfile.TemporaryDirectory(prefix="pai-bench-ttft-") as tmp:
        profile_dir = None if bench.quick or py_spy() is None else Path(tmp)
        with serving(bench, "embedded") as server:
            samples, profile = bench.loop.run(_measure(server, warmup, sends, profile_dir))
            server.check_alive()
    return {
        **summarize(samples),
        "warmup": warmup,
        "target_ms": TARGET_MS,
        "arrangement": "embedded",
        "profile": profile,
    }
