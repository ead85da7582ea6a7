"""Delivery in process: from the model yielding a delta to a subscriber of the same process.

No websocket, no second process: a :class:`~pai_threads.realtime.subscription.
ThreadSubscription` (a channel of the in-memory layer in the thread's group, read through
the cursor that makes delivery exact, as the SSE endpoint reads it) receives the run's events,
and every ``text-delta`` records ``received - yielded`` (the stamp :class:`benchmarks.agents.
StampedModel` puts in the delta). The model is paced (one delta every ``every_ms``), as a
remote provider is: what is measured is the runtime's path per delta (engine, reducer,
publisher, replay buffer, fan-out, receive), not a burst's queueing.

Two arrangements of the embedded default:

- ``executor``: the run executes on the in-process executor's background loop (``pai-runs``)
  and the subscriber reads on another loop, as daphne's consumers do: the hand-off between
  the two loops is included. This is the headline figure (``median_ms`` / ``p99_ms``).
- ``same_loop``: run and subscriber on one loop (what a single-loop runtime measures).

Results: ``median_ms``, ``p99_ms`` (headline, the executor arrangement), ``target_ms``, and
per arrangement ``delivery_ms`` (median / p99 / max), ``deltas``, ``cpu_us_per_delta`` (this
process's CPU over the run divided by the deltas: the whole run's cost, database included).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from benchmarks.agents import STAMP, stream_request
from benchmarks.streaming import latency_ms
from benchmarks.workloads.common import Bench

__all__ = ["ARRANGEMENTS", "TARGET_MS", "run"]

TARGET_MS = 0.5
ARRANGEMENTS = {
    "executor": "run on the embedded executor's loop, subscriber on another loop",
    "same_loop": "run and subscriber on one loop",
}
_TERMINAL = frozenset({"completed", "failed", "cancelled", "waiting"})


def plan(bench: Bench) -> tuple[int, int, int]:
    """(runs per arrangement, deltas per run, ms between deltas)."""
    if bench.quick:
        return 1, 40, 10
    return 3, 200, 10


def _send(bench: Bench, thread_id: str, text: str) -> str:
    from pai_threads import services

    message = {"role": "user", "parts": [{"type": "text", "text": text}]}
    run = services.send(bench.identity, thread_id, message, dispatch=False).run
    assert run is not None  # a fresh thread has no active run to queue behind
    return run.id


async def _measure(thread_id: str, run_id: str, arrangement: str) -> list[int]:
    """Subscribe, start the run, record each delta's ``received - yielded`` (ns)."""
    from pai_threads.execution.execute import aexecute_run
    from pai_threads.executors.loop import background_loop
    from pai_threads.realtime.subscription import ThreadSubscription

    latencies: list[int] = []
    async with ThreadSubscription(thread_id) as subscription:
        if arrangement == "executor":
            execution: Any = asyncio.wrap_future(background_loop().submit(aexecute_run(run_id)))
        else:
            execution = asyncio.ensure_future(aexecute_run(run_id))
        try:
            finished = False
            while not finished:
                for event in await subscription.next_events(1.0):
                    now = time.time_ns()
                    kind = event.get("type")
                    if kind == "generation.message.chunk":
                        chunk = event["chunk"]
                        if chunk.get("type") == "text-delta":
                            match = STAMP.search(str(chunk.get("delta", "")))
                            if match is not None:
                                latencies.append(now - int(match.group(2)))
                    elif kind == "run.status" and event.get("status") in _TERMINAL:
                        finished = True
                if execution.done() and not finished:
                    finished = True  # a run that ended without a status event
        finally:
            await execution
    return latencies


def run(bench: Bench) -> dict[str, Any]:
    runs, deltas, every = plan(bench)
    out: dict[str, Any] = {
        "target_ms": TARGET_MS,
        "deltas_per_run": deltas,
        "every_ms": every,
        "runs": runs,
        "arrangements": {},
    }
    # One short warm-up run: first-use costs (imports, connections, caches) are not delivery.
    warm = bench.new_thread("bench_stream")
    bench.loop.run(
        _measure(warm, _send(bench, warm, stream_request(deltas=5, every_ms=5)), "same_loop")
    )
    for name in ARRANGEMENTS:
        latencies: list[int] = []
        cpu = 0.0
        for _ in range(runs):
            thread_id = bench.new_thread("bench_stream")
            run_id = _send(bench, thread_id, stream_request(deltas=deltas, every_ms=every))
            cpu0 = time.process_time()
            latencies += bench.loop.run(_measure(thread_id, run_id, name))
            cpu += time.process_time() - cpu0
        out["arrangements"][name] = {
            "description": ARRANGEMENTS[name],
            "delivery_ms": latency_ms(latencies),
            "deltas": len(latencies),
            "deltas_expected": runs * deltas,
            "cpu_us_per_delta": cpu / max(1, len(latencies)) * 1e6,
        }
    headline = out["arrangements"]["executor"]["delivery_ms"]
    out["median_ms"], out["p99_ms"] = headline["median"], headline["p99"]
    return out
