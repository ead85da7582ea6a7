"""PAI's rounds folded back into one result per workload, for the detailed tables.

With references, PAI's driver runs once per round (one repetition each, where a workload
honours ``--repetitions``); the detailed W1/W2/W3 tables then read the merged result: W1's
repetitions of every round in order, W2's times as the median over the rounds, W3's
seconds over every round's repetitions. Counts come from the first round (they are exact,
and W1's ``counts_stable`` checks them across all rounds).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from benchmarks.stats import median, spread

__all__ = ["merge_rounds"]


def _w1(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out = copy.deepcopy(rounds[0])
    reps = [rep for r in rounds for rep in r["repetitions"]]
    first = reps[0]
    out["repetitions"] = reps
    out["counts_stable"] = all(
        rep[phase][key] == first[phase][key]
        for rep in reps
        for phase in ("accept", "execution")
        for key in ("pg_equivalent_statements", "commits")
    )
    out["spread"] = {
        key: spread([r[key]["median"] for r in reps]) for key in ("send_ms", "exec_ms", "total_ms")
    } | {f"{key}_p95": spread([r[key]["p95"] for r in reps]) for key in ("exec_ms", "total_ms")}
    return out


def _w2(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out = copy.deepcopy(rounds[0])
    for i, entry in enumerate(out["sizes"]):
        same = [r["sizes"][i] for r in rounds]
        for key in ("total_ms", "exec_ms"):
            entry[key] = {
                "median": median([s[key]["median"] for s in same]),
                "p95": median([s[key]["p95"] for s in same]),
            }
        entry["round_medians_ms"] = [s["total_ms"]["median"] for s in same]
    baseline = out["sizes"][0]["total_ms"]["median"]
    for entry in out["sizes"]:
        entry["vs_new_thread"] = entry["total_ms"]["median"] / baseline
    return out


def _spread_of_spreads(parts: Sequence[dict[str, float]]) -> dict[str, float]:
    return {
        "min": min(p["min"] for p in parts),
        "median": median([p["median"] for p in parts]),
        "max": max(p["max"] for p in parts),
    }


def _w3(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out = copy.deepcopy(rounds[0])
    for mode in ("in_process", "celery"):
        parts = [r[mode] for r in rounds if r.get(mode)]
        if not parts:
            continue
        merged = out[mode]
        for key in ("seconds", "runs_per_second"):
            merged[key] = _spread_of_spreads([p[key] for p in parts])
        merged["repetitions"] = sum(p["repetitions"] for p in parts)
        if "worker_peak_rss_mb" in merged:
            merged["worker_peak_rss_mb"] = max(p["worker_peak_rss_mb"] for p in parts)
    return out


MERGERS = {"W1": _w1, "W2": _w2, "W3": _w3}


def merge_rounds(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One driver result (``{"info", "workloads", "notes"}``) from several rounds' results."""
    merged: dict[str, Any] = {
        "info": rounds[0]["info"],
        "workloads": {},
        "notes": sorted({n for r in rounds for n in r.get("notes", [])}),
    }
    names = [w for r in rounds for w in r["workloads"]]
    for name in dict.fromkeys(names):
        parts = [r["workloads"][name] for r in rounds if name in r["workloads"]]
        merger = MERGERS.get(name)
        merged["workloads"][name] = merger(parts) if merger and len(parts) > 1 else parts[0]
    return merged
