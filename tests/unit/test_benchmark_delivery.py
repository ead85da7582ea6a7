"""The in-process delivery workload's report: its result keys, table and verdict."""

from __future__ import annotations

from typing import Any

from benchmarks.report_delivery import delivery_verdict, render_delivery


def _result(median: float) -> dict[str, Any]:
    arrangement = {
        "delivery_ms": {"median": median, "p99": 2 * median, "max": 3 * median},
        "deltas": 600,
        "deltas_expected": 600,
        "cpu_us_per_delta": 250.0,
    }
    return {
        "target_ms": 0.5,
        "deltas_per_run": 200,
        "every_ms": 10,
        "runs": 3,
        "median_ms": median,
        "p99_ms": 2 * median,
        "arrangements": {"executor": arrangement, "same_loop": dict(arrangement)},
    }


def test_the_verdict_compares_the_headline_median_with_the_target() -> None:
    assert delivery_verdict(_result(0.4)) == "met"
    assert delivery_verdict(_result(0.75)) == "missed by 0.25 ms"


def test_the_table_has_a_row_per_database_and_arrangement() -> None:
    results = {
        "sqlite": {"workloads": {"DELIVERY": _result(0.4)}},
        "postgresql": {"workloads": {}},
    }
    lines = render_delivery(results)
    rows = [line for line in lines if line.startswith("| SQLite")]
    assert len(rows) == 2 and "**0.400**" in rows[0] and "600/600" in rows[0]
    assert "- SQLite: met" in lines
    assert render_delivery({"sqlite": {"workloads": {}}}) == []
