"""Rendering the in-process delivery workload (``DELIVERY``) as Markdown, for
:func:`benchmarks.report.render`."""

from __future__ import annotations

from typing import Any

__all__ = ["delivery_verdict", "render_delivery"]

DATABASES = (("sqlite", "SQLite"), ("postgresql", "PostgreSQL"))


def delivery_verdict(delivery: dict[str, Any]) -> str:
    """ "met" or "missed by X ms" for the headline median against its target."""
    over = delivery["median_ms"] - delivery["target_ms"]
    return "met" if over <= 0 else f"missed by {over:.2f} ms"


def render_delivery(results: dict[str, Any]) -> list[str]:
    present = [
        (label, results[v]["workloads"]["DELIVERY"])
        for v, label in DATABASES
        if "DELIVERY" in results.get(v, {}).get("workloads", {})
    ]
    if not present:
        return []
    first = present[0][1]
    out = [
        "### In-process delivery (model yield -> subscriber)",
        "",
        f"One run at a time streams {first['deltas_per_run']} text deltas, one every "
        f"{first['every_ms']} ms (`StampedModel`), {first['runs']} runs per arrangement; a "
        "subscriber in the same process (a channel of the in-memory layer in the thread's "
        "group, read through the replay cursor, as the SSE endpoint reads it) records "
        "*received - yielded* for every delta. *executor*: the run on the embedded "
        "executor's loop, the subscriber on another loop (daphne's arrangement: the "
        "hand-off between loops included; the headline figure); *same loop*: both on one "
        "loop. CPU: this process's CPU over the runs / deltas (the whole run, database "
        f"included). Target: headline median <= {first['target_ms']:g} ms.",
        "",
        "| DB | arrangement | deltas | delivery ms median / p99 / max | CPU us per delta |",
        "|---|---|---|---|---|",
    ]
    for label, result in present:
        for name, arr in result["arrangements"].items():
            ms = arr["delivery_ms"]
            bold = name == "executor"
            median = f"**{ms['median']:.3f}**" if bold else f"{ms['median']:.3f}"
            out.append(
                f"| {label} | {name.replace('_', ' ')} | {arr['deltas']}/{arr['deltas_expected']}"
                f" | {median} / {ms['p99']:.3f} / {ms['max']:.3f} | "
                f"{arr['cpu_us_per_delta']:.0f} |"
            )
    out += [""]
    out += [f"- {label}: {delivery_verdict(result)}" for label, result in present]
    return [*out, ""]
