"""W4, streaming delivery: from the model yielding a delta to a websocket client receiving it.

1, 10 and 100 concurrent streams of 200 deltas, one every 25 ms (5 s, a fast provider's
pace), each on its own thread and websocket, against a real daphne server on loopback (see
:mod:`benchmarks.streaming` for the arrangements and what is measured). Every level runs
on the same server after a one-stream warm-up. With py-spy installed, the largest level runs
once more under the sampler (``--gil``: where the server's CPU goes); its latencies are not
the ones reported.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from benchmarks.streaming import ARRANGEMENTS, Level, arrangements, py_spy, run_level, serving
from benchmarks.workloads.common import Bench

__all__ = ["run"]

TARGET_MS = 50.0


def plan(bench: Bench) -> tuple[list[int], int, int, float]:
    """(stream counts, deltas per stream, ms between deltas, start stagger seconds)."""
    if bench.quick:
        return [1, 3], 20, 20, 0.1
    return [1, 10, 100], 200, 25, 1.0


def run(bench: Bench) -> dict[str, Any]:
    counts, deltas, every, stagger = plan(bench)
    out: dict[str, Any] = {"target_ms": TARGET_MS, "arrangements": {}}
    for name in arrangements(bench):
        with serving(bench, name, worker_concurrency=max(counts)) as server:
            run_level(bench, server, Level(streams=1, deltas=10, every_ms=10))  # warm-up
            levels = [
                run_level(
                    bench,
                    server,
                    Level(streams=n, deltas=deltas, every_ms=every, stagger_s=stagger),
                )
                for n in counts
            ]
            profile = None
            if not bench.quick and py_spy():
                with tempfile.TemporaryDirectory(prefix="pai-bench-spy-") as tmp:
                    level = Level(streams=max(counts), deltas=deltas, every_ms=every)
                    level.stagger_s = stagger
                    profiled = run_level(bench, server, level, profile_dir=Path(tmp))
                profile = profiled.get("profile")
        out["arrangements"][name] = {
            "description": ARRANGEMENTS[name],
            "levels": levels,
            "profile": profile,
        }
    return out
