"""The side-by-side tables of docs/benchmarks.md: PAI, LangGraph and OpenAI Agents per round."""

from __future__ import annotations

from typing import Any

from benchmarks.reference.compare import FRAMEWORKS, Row, compare

__all__ = ["LABELS", "render_side_by_side", "rows_by_vendor"]

LABELS = {"pai": "PAI", "langgraph": "LangGraph", "openai_agents": "OpenAI Agents"}
VENDORS = (("sqlite", "SQLite"), ("postgresql", "PostgreSQL"))
TITLES = {
    "W1": "W1 tool round trip, ms per run (send + execute)",
    "W2": "W2 one run on a thread with N prior messages, ms per run",
    "W3": "W3 concurrent W1 runs, wall seconds for the batch",
}


def rows_by_vendor(results: dict[str, Any]) -> dict[str, list[Row]]:
    return {
        vendor: compare(results[vendor]["rounds"])
        for vendor, _ in VENDORS
        if results.get(vendor, {}).get("rounds")
    }


def _ratio(row: Row, reference: str) -> str:
    r = row.ratio(reference)
    if r is None:
        return "-"
    return f"**{r['median']:.2f}x** ({r['min']:.2f}-{r['max']:.2f})"


def _time(row: Row, framework: str) -> str:
    value = row.median_ms(framework)
    if value is None:
        return "-"
    return f"{value / 1000:.2f} s" if row.workload == "W3" else f"{value:.1f}"


def _count(value: Any, key: str) -> str:
    if value is None:
        return "-"
    if key == "bytes_written":
        return f"{value / 1024:.1f} KB"
    return f"{value:g}" if float(value).is_integer() else f"{value:.1f}"


def _counts(row: Row, key: str) -> str:
    return " / ".join(_count(row.counts.get(fw, {}).get(key), key) for fw in FRAMEWORKS)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return [*lines, *("| " + " | ".join(row) + " |" for row in rows), ""]


def _versions(results: dict[str, Any]) -> str:
    found: dict[str, dict[str, str]] = {}
    for vendor, _ in VENDORS:
        found |= results.get(vendor, {}).get("reference_versions", {})
    parts = []
    for key, versions in found.items():
        packages = ", ".join(f"{n} {v}" for n, v in versions.items() if n != "python")
        parts.append(f"{LABELS.get(key, key)}: {packages}")
    return "; ".join(parts)


def render_side_by_side(results: dict[str, Any]) -> list[str]:
    by_vendor = rows_by_vendor(results)
    if not by_vendor:
        return []
    rounds = max(len(results[v]["rounds"]) for v in by_vendor)
    out = [
        "### Side by side: LangGraph and the OpenAI Agents SDK",
        "",
        f"The same workloads on the same databases and server, in {rounds} interleaved "
        "round(s): per database and round PAI's driver (one repetition), LangGraph "
        '(`AsyncPostgresSaver` / `AsyncSqliteSaver`, `durability="sync"`, `graph.astream` '
        "with token streaming) and the OpenAI Agents SDK (`SQLAlchemySession` / "
        "`SQLiteSession`, `Runner.run_streamed`), each reference in its own virtualenv, in an "
        "order rotated each round (benchmarks/reference/README.md). Times are the median over "
        "the rounds of each round's median; a ratio is PAI / the reference within one round "
        "(below 1: PAI faster), its median with min-max over the rounds. Counts per run, "
        "PAI / LangGraph / OpenAI Agents: statements and commits are pg_stat_statements and "
        "write transactions on PostgreSQL (on SQLite only PAI's commits, Django's count), "
        "bytes are WAL on PostgreSQL and bytes the process wrote on SQLite. W3 times PAI's "
        "executions only (its sends come before the clock starts, as in the W3 table), the "
        "references' whole runs.",
        "",
    ]
    versions = _versions(results)
    if versions:
        out += [f"Versions: {versions}.", ""]
    for workload in ("W1", "W2", "W3"):
        rows = []
        for vendor, label in VENDORS:
            for row in by_vendor.get(vendor, []):
                if row.workload != workload:
                    continue
                first = [label] + ([f"{int(row.size):,}"] if workload == "W2" else [])
                rows.append(
                    [
                        *first,
                        *(_time(row, fw) for fw in FRAMEWORKS),
                        _ratio(row, "langgraph"),
                        _ratio(row, "openai_agents"),
                        *(_counts(row, k) for k in ("statements", "commits", "bytes_written")),
                    ]
                )
        if not rows:
            continue
        header = ["DB", *(["prior messages"] if workload == "W2" else [])]
        header += [LABELS[fw] for fw in FRAMEWORKS]
        header += ["PAI / LangGraph", "PAI / OpenAI Agents", "statements", "commits", "bytes"]
        out += [f"#### {TITLES[workload]}", "", *_table(header, rows)]
    return out
