"""Issue 6's targets, checked against measured results: met, missed, or not measurable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Verdict", "check"]

MAX_COMMITS = 5
MAX_STATEMENTS = 18
MAX_BYTES = 5 * 1024
MAX_RATIO = 1.2
FLAT_TOLERANCE = 0.10  # "the same amount" at every size: within 10 % of the smallest


@dataclass(frozen=True)
class Verdict:
    target: str
    measured: str
    status: str  # "met" | "missed" | "not measured"


def _w1_totals(w1: dict[str, Any]) -> dict[str, float]:
    rep = w1["repetitions"][0]
    accept, execution = rep["accept"], rep["execution"]
    keys = ("commits", "pg_equivalent_statements", "pg_statements", "pg_client_statements")
    return {k: accept.get(k, 0) + execution.get(k, 0) for k in keys}


def _w1(results: dict[str, Any]) -> list[Verdict]:
    w1 = results.get("postgresql", {}).get("workloads", {}).get("W1")
    if w1 is None:
        return [
            Verdict(f"W1 <= {MAX_COMMITS} commits per run (PostgreSQL)", "-", "not measured"),
            Verdict(f"W1 <= {MAX_STATEMENTS} statements per run (PostgreSQL)", "-", "not measured"),
        ]
    t = _w1_totals(w1)
    commits = t["commits"]
    pgss, client = t["pg_statements"], t["pg_client_statements"]
    if client > MAX_STATEMENTS:
        status = "missed"
    elif pgss > MAX_STATEMENTS:
        status = "missed (only because of foreign-key trigger queries)"
    else:
        status = "met"
    return [
        Verdict(
            f"W1 <= {MAX_COMMITS} commits per run (PostgreSQL)",
            f"{commits:g} (accept 1 + execution {commits - 1:g})",
            "met" if commits <= MAX_COMMITS else "missed",
        ),
        Verdict(
            f"W1 <= {MAX_STATEMENTS} SQL statements per run, BEGIN/COMMIT included "
            "(PostgreSQL, pg_stat_statements)",
            f"{pgss:g} in pg_stat_statements = {client:g} sent by Django "
            f"+ {pgss - client:g} foreign-key trigger queries",
            status,
        ),
        Verdict(
            "W1 time <= 1/2 of LangGraph's (Postgres checkpointer) on the same machine",
            "measured separately by benchmarks/reference/langgraph_w1.py (its own venv; see "
            "benchmarks/reference/README.md): LangGraph 24.9 ms, PAI 52.3 ms median (2.1x)",
            "missed",
        ),
    ]


def _w2(results: dict[str, Any]) -> list[Verdict]:
    verdicts: list[Verdict] = []
    pg = results.get("postgresql", {}).get("workloads", {}).get("W2")
    if pg is None:
        verdicts.append(Verdict("W2 <= 5 KB written per run (PostgreSQL WAL)", "-", "not measured"))
    else:
        sized = [s for s in pg["sizes"] if s["prior_messages"]]
        worst = max(s["bytes_written"]["median"] for s in sized)
        lows = min(s["bytes_written"]["median"] for s in sized)
        measured = ", ".join(
            f"{s['bytes_written']['median'] / 1024:.1f} KB at {s['prior_messages']:,}"
            for s in sized
        )
        verdicts.append(
            Verdict(
                "W2 <= 5 KB written per run (PostgreSQL WAL) at 100, 1,000 and 10,000",
                measured,
                "met" if worst <= MAX_BYTES else "missed",
            )
        )
        verdicts.append(
            Verdict(
                "W2 writes the same amount at every thread length",
                f"{lows / 1024:.1f}-{worst / 1024:.1f} KB (medians)",
                "met" if worst <= lows * (1 + FLAT_TOLERANCE) else "missed",
            )
        )
    for vendor, label in (("postgresql", "PostgreSQL"), ("sqlite", "SQLite")):
        w2 = results.get(vendor, {}).get("workloads", {}).get("W2")
        if w2 is None:
            continue
        sized = [s for s in w2["sizes"] if s["prior_messages"]]
        worst = max(s["vs_new_thread"] for s in sized)
        measured = ", ".join(f"{s['vs_new_thread']:.2f}x at {s['prior_messages']:,}" for s in sized)
        verdicts.append(
            Verdict(
                f"W2 time within {MAX_RATIO}x of a one-step run on a new thread ({label})",
                measured,
                "met" if worst <= MAX_RATIO else "missed",
            )
        )
    return verdicts


W4_P99_MS = 50.0
W4_STREAMS = 100
W5_N = 200
VENDOR_LABELS = (("sqlite", "SQLite"), ("postgresql", "PostgreSQL"))
ARRANGEMENT_LABELS = {"embedded": "embedded", "celery": "Celery + Redis"}


def _streaming(results: dict[str, Any], workload: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for vendor, label in VENDOR_LABELS:
        w = results.get(vendor, {}).get("workloads", {}).get(workload)
        if w is None:
            continue
        for name, arr in w["arrangements"].items():
            out.append((f"{label}, {ARRANGEMENT_LABELS.get(name, name)}", arr))
    return out


def _w4(results: dict[str, Any]) -> list[Verdict]:
    target = f"W4 delivery p99 < {W4_P99_MS:g} ms at {W4_STREAMS} streams"
    measured = _streaming(results, "W4")
    if not measured:
        return [Verdict(target, "-", "not measured")]
    verdicts = []
    for where, arr in measured:
        level = next((lv for lv in arr["levels"] if lv["streams"] == W4_STREAMS), None)
        if level is None:
            verdicts.append(Verdict(f"{target} ({where})", "no 100-stream level", "not measured"))
            continue
        p99 = level["delivery_ms"]["p99"]
        busy = ", ".join(
            f"{proc} {sec / level['wall_s']:.2f} cores" for proc, sec in level["cpu_s"].items()
        )
        verdicts.append(
            Verdict(
                f"{target} ({where})",
                f"p99 {p99:.1f} ms (median {level['delivery_ms']['median']:.1f} ms; {busy})",
                "met" if p99 < W4_P99_MS and level["all_delivered"] else "missed",
            )
        )
    return verdicts


def _w5(results: dict[str, Any]) -> list[Verdict]:
    target = f"W5 N >= {W5_N} concurrent 5 s streams per worker process"
    measured = _streaming(results, "W5")
    if not measured:
        return [Verdict(target, "-", "not measured")]
    verdicts = []
    for where, arr in measured:
        levels = arr["levels"]
        held = [lv for lv in levels if lv["held"]]
        text = f"N = {arr['max_held']}"
        if held:
            best = held[-1]
            text += (
                f" ({best['cpu_s_per_run']:.3f} CPU s and {best['rss_mb_per_run']:.2f} MB "
                "RSS per run)"
            )
        failed = next((lv for lv in levels if not lv["held"]), None)
        if failed is not None:
            text += f"; N = {failed['streams']} not held: {failed['why_not']}"
        verdicts.append(
            Verdict(f"{target} ({where})", text, "met" if arr["max_held"] >= W5_N else "missed")
        )
    return verdicts


def check(results: dict[str, Any]) -> list[Verdict]:
    return [*_w1(results), *_w2(results), *_w4(results), *_w5(results)]
