"""Issue 16's targets, checked against measured results: met, missed (by how much), or not
measured.

Where the figures come from (``results[vendor]`` is one database's merged driver result):

* W1/W3 against LangGraph: ``results[vendor]["rounds"]`` (the interleaved rounds, see
  :mod:`benchmarks.reference.compare`); a ratio is taken within each round.
* W1 commits: ``workloads["W1"]["repetitions"][0]["accept"|"execution"]["commits"]``.
* W2: ``workloads["W2"]["sizes"][i]["total_ms"]["median"]`` and ``["bytes_written"]``.
* Result keys other workloads provide (the extension points: a workload that reports the key
  is checked, one that does not reads "not measured"):

  - ``workloads["TTFT"]["median_ms"]``: time to first token added by PAI (ms);
  - ``workloads[name]["median_ms"]`` for ``name`` in :data:`DELIVERY_WORKLOADS`: in-process
    delivery, model yield -> subscriber (ms);
  - ``workloads["W1L"]["ratio_to_w1"]`` (and optionally ``["added_per_run"]``, a dict of
    count differences): the lifecycle agent's cost beside the plain agent;
  - W4/W5: ``workloads["W4"|"W5"]["arrangements"][name]["levels"]`` as
    :mod:`benchmarks.workloads.w4` / ``w5`` write them (W5's CPU per delta is a held level's
    ``cpu_s_per_run`` / ``deltas``).

Add a target of the same kind (a median in a result key against a limit) as one more
:class:`KeyTarget` in :data:`KEY_TARGETS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.reference.compare import Row, compare
from benchmarks.stats import spread

__all__ = ["DELIVERY_WORKLOADS", "KEY_TARGETS", "KeyTarget", "Verdict", "check"]

W1_RATIO = {"postgresql": 0.5, "sqlite": 0.7}  # PAI's W1 time / LangGraph's, same run
W3_RUNS_PER_SECOND_FACTOR = 2.0  # PAI's runs/s >= 2x LangGraph's
MAX_COMMITS = 5  # per W1 run after thread creation (accept + execution)
MAX_WAL = 5 * 1024  # W2 bytes per run (PostgreSQL WAL)
FLAT = 1.2  # W2 "flat": the slowest median at 1,000 or 10,000 within 1.2x of the one at 100
W4_P99_MS = 50.0
W4_STREAMS = 100
W5_N = 200
W5_CPU_US_PER_DELTA = 100.0
DELIVERY_WORKLOADS = ("DELIVERY", "W6")
VENDORS = (("sqlite", "SQLite"), ("postgresql", "PostgreSQL"))
ARRANGEMENT_LABELS = {"embedded": "embedded", "celery": "Celery + Redis"}


@dataclass(frozen=True)
class Verdict:
    target: str
    measured: str
    status: str  # "met" | "missed by ..." | "not measured" | "reported"


@dataclass(frozen=True, kw_only=True)
class KeyTarget:
    """A median read from a result key, at most ``limit``: the shape of most latency targets."""

    target: str
    workloads: tuple[str, ...]
    key: str
    limit: float
    unit: str = "ms"


KEY_TARGETS = (
    KeyTarget(
        target="Time to first token added by PAI, median <= 10 ms",
        workloads=("TTFT",),
        key="median_ms",
        limit=10.0,
    ),
    KeyTarget(
        target="In-process delivery (model yield -> subscriber), median <= 0.5 ms",
        workloads=DELIVERY_WORKLOADS,
        key="median_ms",
        limit=0.5,
    ),
)


def _workload(results: dict[str, Any], vendor: str, name: str) -> Any:
    return results.get(vendor, {}).get("workloads", {}).get(name)


def _over(value: float, limit: float, unit: str) -> str:
    return "met" if value <= limit else f"missed by {value - limit:.2f} {unit}".replace(".00 ", " ")


def _row(results: dict[str, Any], vendor: str, workload: str) -> Row | None:
    rounds = results.get(vendor, {}).get("rounds")
    if not rounds:
        return None
    row = next((r for r in compare(rounds) if r.workload == workload), None)
    return row if row is not None and row.ratios.get("langgraph") else None


def _per_database(
    target: Callable[[str], str],
    find: Callable[[str], Any],
    judge: Callable[[str, Any], tuple[str, str]],
    absent: str = "-",
) -> list[Verdict]:
    """One verdict per database: ``judge(vendor, found)`` gives (measured, status)."""
    out = []
    for vendor, label in VENDORS:
        found = find(vendor)
        if found is None:
            out.append(Verdict(f"{target(vendor)} ({label})", absent, "not measured"))
        else:
            out.append(Verdict(f"{target(vendor)} ({label})", *judge(vendor, found)))
    return out


NO_ROUNDS = "no interleaved LangGraph rounds"


def _w1_ratio(results: dict[str, Any]) -> list[Verdict]:
    def judge(vendor: str, row: Row) -> tuple[str, str]:
        limit = W1_RATIO[vendor]
        r = spread(row.ratios["langgraph"])
        pai, lg = row.median_ms("pai") or 0.0, row.median_ms("langgraph") or 0.0
        measured = (
            f"PAI {pai:.1f} ms, LangGraph {lg:.1f} ms: {r['median']:.2f}x "
            f"({r['min']:.2f}-{r['max']:.2f} over {len(row.ratios['langgraph'])} round(s))"
        )
        if r["median"] <= limit:
            return measured, "met"
        if pai <= limit * lg:  # the medians' ratio is in, the rounds' median ratio is not
            return measured, (
                f"missed: the rounds' median ratio is {r['median']:.3f}x "
                f"(the median times' is {pai / lg:.3f}x)"
            )
        return measured, (
            f"missed by {r['median'] / limit:.2f}x: PAI needs <= {limit * lg:.1f} ms, "
            f"{pai - limit * lg:.1f} ms less"
        )

    return _per_database(
        lambda vendor: f"W1 median <= {W1_RATIO[vendor]}x LangGraph's, same run",
        lambda vendor: _row(results, vendor, "W1"),
        judge,
        NO_ROUNDS,
    )


def _w1_commits(results: dict[str, Any]) -> list[Verdict]:
    def judge(vendor: str, w1: dict[str, Any]) -> tuple[str, str]:
        rep = w1["repetitions"][0]
        accept, execution = rep["accept"]["commits"], rep["execution"]["commits"]
        total = accept + execution
        measured = f"{total:g} (accept {accept:g} + execution {execution:g})"
        return measured, _over(total, MAX_COMMITS, "commits")

    return _per_database(
        lambda vendor: f"W1 <= {MAX_COMMITS} durable commits per run after thread creation",
        lambda vendor: _workload(results, vendor, "W1"),
        judge,
    )


def _w3(results: dict[str, Any]) -> list[Verdict]:
    factor = W3_RUNS_PER_SECOND_FACTOR

    def judge(vendor: str, row: Row) -> tuple[str, str]:
        # runs/s ratio PAI / LangGraph within a round = LangGraph's seconds / PAI's.
        r = spread([1 / x for x in row.ratios["langgraph"]])
        rps = {fw: spread(v["runs_per_second"])["median"] for fw, v in row.extra.items()}
        measured = (
            f"PAI {rps.get('pai', 0):.0f} runs/s, LangGraph {rps.get('langgraph', 0):.0f} "
            f"runs/s: {r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f})"
        )
        if r["median"] >= factor:
            return measured, "met"
        return measured, f"missed by {factor / r['median']:.2f}x"

    return _per_database(
        lambda vendor: f"W3 50 concurrent runs: >= {factor:g}x LangGraph's runs/s",
        lambda vendor: _row(results, vendor, "W3"),
        judge,
        NO_ROUNDS,
    )


def _w2(results: dict[str, Any]) -> list[Verdict]:
    out = []
    for vendor, label in VENDORS:
        target = f"W2 flat: median at 1,000 and 10,000 prior messages <= {FLAT}x at 100 ({label})"
        w2 = _workload(results, vendor, "W2")
        if w2 is None:
            out.append(Verdict(target, "-", "not measured"))
            continue
        sized = {s["prior_messages"]: s for s in w2["sizes"]}
        ms = {n: s["total_ms"]["median"] for n, s in sized.items() if n}
        low, high = ms.get(100), max((v for n, v in ms.items() if n > 100), default=None)
        measured = ", ".join(f"{v:.1f} ms at {n:,}" for n, v in sorted(ms.items()))
        if low is None or high is None:
            out.append(Verdict(target, measured or "-", "not measured"))
            continue
        status = "met" if high <= FLAT * low else f"missed by {high / (FLAT * low):.2f}x"
        out.append(Verdict(target, f"{measured} ({high / low:.2f}x)", status))
    w2 = _workload(results, "postgresql", "W2")
    target = f"W2 <= {MAX_WAL // 1024} KB WAL per run at 100, 1,000 and 10,000 (PostgreSQL)"
    if w2 is None:
        return [*out, Verdict(target, "-", "not measured")]
    sizes = [s for s in w2["sizes"] if s["prior_messages"]]
    wal = {s["prior_messages"]: s["bytes_written"]["median"] for s in sizes}
    measured = ", ".join(f"{v / 1024:.1f} KB at {n:,}" for n, v in sorted(wal.items()))
    worst = max(wal.values())
    return [*out, Verdict(target, measured, _over(worst / 1024, MAX_WAL / 1024, "KB"))]


def _keys(results: dict[str, Any]) -> list[Verdict]:
    out = []
    for spec in KEY_TARGETS:
        found = False
        for vendor, label in VENDORS:
            for name in spec.workloads:
                value = (_workload(results, vendor, name) or {}).get(spec.key)
                if value is None:
                    continue
                found = True
                measured = f"{value:.2f} {spec.unit}"
                verdict = _over(value, spec.limit, spec.unit)
                out.append(Verdict(f"{spec.target} ({label})", measured, verdict))
        if not found:
            out.append(Verdict(spec.target, "-", "not measured"))
    return out


def _streaming(results: dict[str, Any], workload: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for vendor, label in VENDORS:
        w = _workload(results, vendor, workload)
        for name, arr in (w or {}).get("arrangements", {}).items():
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
        status = "met" if p99 < W4_P99_MS else f"missed by {p99 - W4_P99_MS:.0f} ms"
        if not level["all_delivered"]:
            status = "missed: deltas lost"
        verdicts.append(
            Verdict(
                f"{target} ({where})",
                f"p99 {p99:.1f} ms (median {level['delivery_ms']['median']:.1f} ms; {busy})",
                status,
            )
        )
    return verdicts


def _w5(results: dict[str, Any]) -> list[Verdict]:
    target = f"W5 >= {W5_N} concurrent 5 s streams per worker process, p99 < 100 ms"
    cpu_target = f"W5 <= {W5_CPU_US_PER_DELTA:g} us of worker CPU per delivered delta"
    measured = _streaming(results, "W5")
    if not measured:
        return [Verdict(target, "-", "not measured"), Verdict(cpu_target, "-", "not measured")]
    verdicts = []
    for where, arr in measured:
        held = [lv for lv in arr["levels"] if lv["held"]]
        text = f"N = {arr['max_held']}"
        if held:
            best = held[-1]
            text += f" ({best['rss_mb_per_run']:.2f} MB RSS per run)"
            per_delta = best["cpu_s_per_run"] / best["deltas"] * 1e6
            verdicts.append(
                Verdict(
                    f"{cpu_target} ({where})",
                    f"{per_delta:.0f} us at N = {best['streams']}",
                    _over(per_delta, W5_CPU_US_PER_DELTA, "us"),
                )
            )
        failed = next((lv for lv in arr["levels"] if not lv["held"]), None)
        if failed is not None:
            text += f"; N = {failed['streams']} not held: {failed['why_not']}"
        status = "met" if arr["max_held"] >= W5_N else f"missed by {W5_N - arr['max_held']} streams"
        verdicts.insert(0, Verdict(f"{target} ({where})", text, status))
    return verdicts


def _lifecycle(results: dict[str, Any]) -> list[Verdict]:
    target = "Cost of a lifecycle agent (every phase overridden) reported beside the plain agent"
    out = []
    for vendor, label in VENDORS:
        w1l = _workload(results, vendor, "W1L")
        if not w1l or "ratio_to_w1" not in w1l:
            continue
        added = w1l.get("added_per_run") or {}
        extra = ", ".join(f"{k} {v:+g}" for k, v in added.items() if isinstance(v, int | float))
        measured = f"{w1l['ratio_to_w1']:.2f}x the plain W1" + (f" ({extra})" if extra else "")
        out.append(Verdict(f"{target} ({label})", measured, "reported"))
    return out or [Verdict(target, "-", "not measured")]


CHECKS: tuple[Callable[[dict[str, Any]], list[Verdict]], ...] = (
    _w1_ratio,
    _w1_commits,
    _w3,
    _w2,
    _keys,
    _w4,
    _w5,
    _lifecycle,
)


def check(results: dict[str, Any]) -> list[Verdict]:
    return [verdict for one in CHECKS for verdict in one(results)]
