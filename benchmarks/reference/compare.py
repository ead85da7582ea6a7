"""Side by side: the same figures of PAI and each reference per round, and PAI's ratios.

Pure functions over recorded JSON (unit-tested on it): ``results[vendor]["rounds"]`` is a list
of ``{"order": [...], "pai": <PAI's driver workloads of the round>, "<reference key>":
<the reference's workloads of the round>}``. Each round's figures are compared within the
round (same minutes, same machine noise): a ratio is PAI's time / the reference's time *of
the same round*, summarised as its median and min-max over the rounds. Below 1 PAI is faster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.stats import median, spread

__all__ = [
    "FRAMEWORKS",
    "Row",
    "compare",
    "pai_figures",
    "ref_figures",
    "round_order",
]

FRAMEWORKS = ("pai", "langgraph", "openai_agents")
COUNTS = ("statements", "commits", "bytes_written")


def round_order(names: Sequence[str], round_index: int) -> list[str]:
    """The order of round ``round_index``: rotated by one each round, so no runtime always
    runs first (after a fresh database) or last (after the others warmed the server)."""
    if not names:
        return []
    k = round_index % len(names)
    return [*names[k:], *names[:k]]


def _sum(phases: Sequence[dict[str, Any]], key: str) -> float | None:
    values = [p.get(key) for p in phases]
    return None if any(v is None for v in values) else float(sum(values))  # type: ignore[arg-type]


def pai_figures(workloads: dict[str, Any]) -> dict[str, Any]:
    """PAI's comparable figures from one round of its driver: times and per-run counts."""
    out: dict[str, Any] = {}
    w1 = workloads.get("W1")
    if w1:
        reps = w1["repetitions"]
        phases = (reps[0]["accept"], reps[0]["execution"])
        out["W1"] = {
            "ms": median([r["total_ms"]["median"] for r in reps]),
            "p95_ms": median([r["total_ms"]["p95"] for r in reps]),
            "statements": _sum(phases, "pg_statements"),
            "commits": _sum(phases, "commits"),
            "bytes_written": _sum(phases, "bytes_written"),
        }
    w2 = workloads.get("W2")
    if w2:
        out["W2"] = {
            str(s["prior_messages"]): {
                "ms": s["total_ms"]["median"],
                "p95_ms": s["total_ms"]["p95"],
                "statements": s.get("pg_statements", {}).get("median"),
                "commits": s["commits"]["median"],
                "bytes_written": s.get("bytes_written", {}).get("median"),
            }
            for s in w2["sizes"]
        }
    w3 = (workloads.get("W3") or {}).get("in_process")
    if w3:
        out["W3"] = {
            "ms": w3["seconds"]["median"] * 1000,
            "runs_per_second": w3["runs_per_second"]["median"],
            "concurrent": w3["concurrent"],
        }
    return out


def _ref_counts(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: entry.get(k) for k in COUNTS}


def ref_figures(workloads: dict[str, Any]) -> dict[str, Any]:
    """A reference's figures from one round (:mod:`benchmarks.reference.protocol`'s JSON)."""
    out: dict[str, Any] = {}
    w1 = workloads.get("W1")
    if w1:
        out["W1"] = {"ms": w1["ms"]["median"], "p95_ms": w1["ms"]["p95"], **_ref_counts(w1)}
    w2 = workloads.get("W2")
    if w2:
        out["W2"] = {
            str(s["prior_messages"]): {
                "ms": s["ms"]["median"],
                "p95_ms": s["ms"]["p95"],
                **_ref_counts(s),
            }
            for s in w2["sizes"]
        }
    w3 = workloads.get("W3")
    if w3:
        out["W3"] = {
            "ms": w3["seconds"] * 1000,
            "runs_per_second": w3["runs_per_second"],
            "concurrent": w3["concurrent"],
        }
    return out


@dataclass
class Row:
    """One comparable measurement (W1, W2 at one size, W3) on one database."""

    workload: str
    size: str = ""  # W2's prior messages
    ms: dict[str, list[float]] = field(default_factory=dict)  # framework -> per-round ms
    counts: dict[str, dict[str, Any]] = field(default_factory=dict)  # framework -> 1st round
    ratios: dict[str, list[float]] = field(default_factory=dict)  # reference -> per round
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)  # e.g. W3 runs/s

    def median_ms(self, framework: str) -> float | None:
        values = self.ms.get(framework)
        return median(values) if values else None

    def ratio(self, reference: str) -> dict[str, float] | None:
        values = self.ratios.get(reference)
        return spread(values) if values else None


def _figures(round_: dict[str, Any], framework: str) -> dict[str, Any]:
    data = round_.get(framework)
    if not data:
        return {}
    return pai_figures(data) if framework == "pai" else ref_figures(data)


def _pick(figures: dict[str, Any], workload: str, size: str) -> dict[str, Any] | None:
    entry = figures.get(workload)
    if entry is None:
        return None
    return entry.get(size) if size else entry


def compare(rounds: Sequence[dict[str, Any]]) -> list[Row]:
    """Every row measured by PAI in the rounds, with the references that measured it too."""
    per_round = [{fw: _figures(r, fw) for fw in FRAMEWORKS} for r in rounds]
    keys: list[tuple[str, str]] = []
    for figs in per_round:
        for workload, entry in figs["pai"].items():
            sizes = sorted(entry, key=int) if workload == "W2" else [""]
            keys += [(workload, s) for s in sizes if (workload, s) not in keys]
    rows = []
    for workload, size in keys:
        row = Row(workload=workload, size=size)
        for figs in per_round:
            pai = _pick(figs["pai"], workload, size)
            for fw in FRAMEWORKS:
                entry = _pick(figs[fw], workload, size)
                if entry is None:
                    continue
                row.ms.setdefault(fw, []).append(entry["ms"])
                row.counts.setdefault(fw, {k: entry.get(k) for k in COUNTS})
                if "runs_per_second" in entry:
                    row.extra.setdefault(fw, {}).setdefault("runs_per_second", []).append(
                        entry["runs_per_second"]
                    )
                if fw != "pai" and pai is not None and entry["ms"] > 0:
                    row.ratios.setdefault(fw, []).append(pai["ms"] / entry["ms"])
        rows.append(row)
    return rows
