"""W1L, W1 with a lifecycle: the same tool round trip, its agent overriding every phase.

``bench_w1_lifecycle`` is ``bench_w1`` plus :class:`benchmarks.agents.NoOpLifecycle`
(every phase of ``PHASES``, ``async def``, changing nothing), so the difference is what the
hooks cost the runtime. Repetitions of the plain agent and of the lifecycle agent
alternate (the order flips each time), so the machine's drift hits both alike; the ratio
is taken per repetition (lifecycle median / plain median) and reported with its min-max.
Each repetition is W1's own (:func:`benchmarks.workloads.w1.repetition`).
"""

from __future__ import annotations

from typing import Any

from benchmarks.stats import spread
from benchmarks.workloads import w1
from benchmarks.workloads.common import Bench

__all__ = ["AGENT", "count_difference", "ratios", "run"]

AGENT = "bench_w1_lifecycle"
COUNTED = ("pg_equivalent_statements", "statements", "commits", "pg_statements")


def ratios(plain: list[dict[str, Any]], hooked: list[dict[str, Any]], key: str) -> dict[str, float]:
    """Min, median and max over repetitions of hooked / plain ``key`` medians, pairing the
    repetitions that ran next to each other."""
    return spread([h[key]["median"] / p[key]["median"] for p, h in zip(plain, hooked, strict=True)])


def count_difference(plain: dict[str, Any], hooked: dict[str, Any]) -> dict[str, float]:
    """Per-run counts the lifecycle adds (accept + execution), from one repetition of each."""
    out: dict[str, float] = {}
    for key in COUNTED:
        if key in plain["execution"]:
            out[key] = sum(hooked[ph][key] - plain[ph][key] for ph in ("accept", "execution"))
    return out


def run(bench: Bench) -> dict[str, Any]:
    warmup, runs, reps = w1.sizes(bench)
    w1.warm_up(bench, warmup, w1.AGENT)
    w1.warm_up(bench, warmup, AGENT)
    plain: list[dict[str, Any]] = []
    hooked: list[dict[str, Any]] = []
    for rep in range(reps):
        top = 30 if rep == 0 else 0
        order = (w1.AGENT, AGENT) if rep % 2 == 0 else (AGENT, w1.AGENT)
        for agent in order:
            into = plain if agent == w1.AGENT else hooked
            into.append(w1.repetition(bench, runs, agent, top=top))
    out = w1.summary(hooked, warmup=warmup, engine=w1.engine_only(bench, runs, AGENT))
    total = ratios(plain, hooked, "total_ms")
    out |= {
        "ratio_to_w1": total["median"],
        "ratio_to_w1_spread": total,
        "exec_ratio_to_w1": ratios(plain, hooked, "exec_ms"),
        "added_per_run": count_difference(plain[0], hooked[0]),
        "plain": w1.summary(plain, warmup=warmup, engine=w1.engine_only(bench, runs)),
    }
    return out
