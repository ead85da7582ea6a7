"""Cell formatting shared by the report's sections (:mod:`benchmarks.report` and its
``report_*`` siblings), so that every table writes a millisecond or a byte count alike."""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "VENDORS",
    "abbreviate",
    "fmt_kb",
    "fmt_ms",
    "fmt_n",
    "present",
    "table",
    "wal_kinds",
]

VENDORS = (("sqlite", "SQLite"), ("postgresql", "PostgreSQL"))


def fmt_ms(value: float) -> str:
    return f"{value:.1f}"


def fmt_n(value: float) -> str:
    return f"{value:g}" if float(value).is_integer() else f"{value:.2f}"


def fmt_kb(value: float) -> str:
    return f"{value / 1024:.1f} KB"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return [*lines, ""]


def present(results: dict[str, Any], workload: str) -> list[tuple[str, str]]:
    return [
        (v, label) for v, label in VENDORS if workload in results.get(v, {}).get("workloads", {})
    ]


def abbreviate(sql: str) -> str:
    """Shorten ORM SQL for a table cell: drop quoting, table prefixes and long column lists."""
    s = sql.replace('"', "")
    s = re.sub(r"\bpai_threads_(\w+)\.", "", s)
    s = re.sub(r"^SELECT (?!1 ).{40,}? FROM ", "SELECT ... FROM ", s)
    s = re.sub(r"INSERT INTO (\S+) \(.*?\) VALUES \(.*?\)", r"INSERT INTO \1 (...) VALUES (...)", s)
    s = re.sub(r"::pg_catalog\.text|pg_catalog\.", "", s)
    return s if len(s) <= 150 else s[:147] + "..."


def wal_kinds(kinds: dict[str, float]) -> str:
    total = sum(kinds.values())
    parts = sorted(kinds.items(), key=lambda kv: -kv[1])
    return f"{total / 1024:.1f} KB = " + ", ".join(f"{k} {v / 1024:.2f} KB" for k, v in parts)
