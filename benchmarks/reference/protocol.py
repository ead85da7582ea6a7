"""What every reference runtime implements, and the one measuring loop they all share.

A reference (LangGraph, the OpenAI Agents SDK) runs in a virtualenv of its own, as
``python -m benchmarks.reference.<name> --db ... --json OUT``: this module is its entry point
(:func:`main`) and uses the standard library only, so it imports in any virtualenv. The
framework module supplies a :class:`Reference`; the workloads are measured here exactly as
PAI's workloads (``benchmarks/workloads/w1.py``, ``w2.py``, ``w3.py``) measure PAI:

* W1: a new thread per run, the user message, step 1 calls ``lookup(q="x")``, step 2 streams
  100 deltas of 4 characters, every step durable before the next. Warm-up runs, then the
  measured runs one after another on one event loop: median and p95 ms per run.
* W2: one one-step text answer (100 deltas) on a thread that already holds N messages, each
  run measured on its own and undone afterwards (unmeasured) so every run sees exactly N.
* W3: 50 W1 runs at once (``asyncio.gather``) on one loop, after one warm-up batch.

One invocation is one *round*: the CLI (:mod:`benchmarks.cli`) runs the rounds of PAI and the
references interleaved. The database probe (:mod:`benchmarks.reference.probes`) counts
statements, write transactions and WAL per run on PostgreSQL, bytes written on SQLite.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import math
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "DELTA",
    "DELTAS",
    "INSTRUCTIONS",
    "PRIOR_TEXT",
    "USER_TEXT",
    "Reference",
    "main",
    "plan",
    "timing",
]

USER_TEXT = "Look up x, please."  # PAI's W1 user message (benchmarks/workloads/common.py)
INSTRUCTIONS = "Benchmark agent: look it up, then answer."
DELTA = "abc "  # PAI's bench models stream "abc " x 100 (benchmarks/agents.py)
DELTAS = 100
# W2's prior messages: ~200 characters each, as benchmarks/workloads/w2.py writes them.
PRIOR_TEXT = ("The quick brown fox jumps over the lazy dog while benchmarks count bytes. " * 3)[
    :200
]


class Reference(Protocol):
    """One runtime on one database. Every method is a coroutine run on the round's one loop."""

    name: str
    tables: tuple[str, ...]  # its tables on PostgreSQL (autovacuum is turned off on them)

    async def open(self, db: str, url: str) -> None:
        """Connect (``db`` is ``sqlite`` or ``postgresql``; ``url`` a file path or a URL)."""

    async def close(self) -> None: ...

    async def thread(self) -> Any:
        """A new thread (unmeasured, as PAI's W1 creates its threads before timing)."""

    async def w1(self, thread: Any) -> None:
        """One whole W1 run on a new thread, checked: 100 deltas streamed, every step stored."""

    async def prefill(self, messages: int) -> Any:
        """A thread holding ``messages`` committed messages (unmeasured); returns its handle."""

    async def w2(self, thread: Any) -> None:
        """One one-step text run (100 deltas) on the prefilled thread."""

    async def undo(self, thread: Any) -> None:
        """Remove what :meth:`w2` added, so the next run sees the same history (unmeasured)."""

    def versions(self) -> dict[str, str]: ...


def plan(quick: bool) -> dict[str, Any]:
    """The sizes of PAI's workloads for one round (one repetition): keep them in step."""
    if quick:
        return {"w1": (1, 5), "w2": [(0, 3), (100, 3), (1_000, 3), (10_000, 3)], "w3": 5}
    return {"w1": (20, 200), "w2": [(0, 50), (100, 50), (1_000, 50), (10_000, 50)], "w3": 50}


def _percentile(values: Sequence[float], pct: float) -> float:
    """Nearest rank, as ``benchmarks.stats.percentile`` (not importable here: stdlib only)."""
    ordered = sorted(values)
    return float(ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1])


def timing(ms: Sequence[float]) -> dict[str, float]:
    ordered = sorted(ms)
    mid = len(ordered) // 2
    med = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return {"median": float(med), "p95": _percentile(ordered, 95)}


def _per_run(stats: dict[str, float], runs: int) -> dict[str, float]:
    return {k: v / runs for k, v in stats.items()}


async def _timed(call: Callable[[], Awaitable[None]]) -> float:
    t0 = time.perf_counter()
    await call()
    return (time.perf_counter() - t0) * 1000


async def _w1(ref: Reference, probe: Any, warmup: int, runs: int) -> dict[str, Any]:
    for _ in range(warmup):
        await ref.w1(await ref.thread())
    threads = [await ref.thread() for _ in range(runs)]
    probe.start()
    times = [await _timed(functools.partial(ref.w1, t)) for t in threads]
    seconds = sum(times) / 1000
    return {
        "runs": runs,
        "warmup": warmup,
        "ms": timing(times),
        "runs_per_second": runs / seconds,
        **_per_run(probe.stop(), runs),
    }


async def _w2(ref: Reference, probe: Any, sizes: list[tuple[int, int]]) -> dict[str, Any]:
    warm = await ref.prefill(0)
    for _ in range(3):
        await ref.w2(warm)
        await ref.undo(warm)
    out = []
    for prior, runs in sizes:
        thread = await ref.prefill(prior)
        times: list[float] = []
        per_run: list[dict[str, float]] = []
        for _ in range(runs):
            probe.start()
            times.append(await _timed(functools.partial(ref.w2, thread)))
            per_run.append(probe.stop())
            await ref.undo(thread)
        entry: dict[str, Any] = {"prior_messages": prior, "runs": runs, "ms": timing(times)}
        for key in per_run[0]:
            entry[key] = timing([r[key] for r in per_run])["median"]
        out.append(entry)
    return {"sizes": out}


async def _w3(ref: Reference, probe: Any, concurrent: int) -> dict[str, Any]:
    warm = [await ref.thread() for _ in range(concurrent)]
    await asyncio.gather(*(ref.w1(t) for t in warm))
    threads = [await ref.thread() for _ in range(concurrent)]
    probe.start()
    t0 = time.perf_counter()
    await asyncio.gather(*(ref.w1(t) for t in threads))
    seconds = time.perf_counter() - t0
    return {
        "concurrent": concurrent,
        "seconds": seconds,
        "runs_per_second": concurrent / seconds,
        **_per_run(probe.stop(), concurrent),
    }


async def _measure(ref: Reference, args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.reference.probes import make_probe

    sizes = plan(args.quick)
    await ref.open(args.db, args.url)
    probe = make_probe(args.db, args.url)
    probe.quiet_autovacuum(ref.tables)
    workloads: dict[str, Any] = {}
    try:
        for name in args.only:
            t0 = time.perf_counter()
            if name == "W1":
                workloads[name] = await _w1(ref, probe, *sizes["w1"])
            elif name == "W2":
                workloads[name] = await _w2(ref, probe, sizes["w2"])
            elif name == "W3":
                workloads[name] = await _w3(ref, probe, sizes["w3"])
            workloads[name]["wall_seconds"] = time.perf_counter() - t0
            print(
                f"ref[{ref.name}/{args.db}]: {name} done in {workloads[name]['wall_seconds']:.1f}s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        probe.close()
        await ref.close()
    return workloads


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="One round of a reference runtime's workloads.")
    parser.add_argument("--db", choices=("sqlite", "postgresql"), required=True)
    parser.add_argument("--url", required=True, help="PostgreSQL database URL, or a SQLite path")
    parser.add_argument("--only", default="W1,W2,W3")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    args.only = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    return args


def main(ref: Reference, argv: list[str] | None = None) -> int:
    """Run one round and write ``{"framework", "versions", "db", "workloads", ...}``."""
    args = _parse(argv)
    load = os.getloadavg()
    with asyncio.Runner() as runner:
        workloads = runner.run(_measure(ref, args))
    result = {
        "framework": ref.name,
        "versions": ref.versions() | {"python": platform.python_version()},
        "db": args.db,
        "quick": args.quick,
        "loadavg": [load, os.getloadavg()],
        "workloads": workloads,
    }
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0
