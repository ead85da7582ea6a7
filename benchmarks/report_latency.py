"""Rendering TTFT (time to first token added) and W1L (W1 with every lifecycle phase) as
Markdown, for :func:`benchmarks.report.render`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

__all__ = ["render_latency", "ttft_verdict"]

DATABASES = (("sqlite", "SQLite"), ("postgresql", "PostgreSQL"))


def _cells(d: dict[str, float], bold: bool = False) -> str:
    med = f"{d['median']:.1f}"
    return f"{'**' + med + '**' if bold else med} / {d['p95']:.1f}"


def _rows_table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return [*out, *("| " + " | ".join(row) + " |" for row in rows), ""]


def _with(results: dict[str, Any], workload: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (label, results[v]["workloads"][workload])
        for v, label in DATABASES
        if workload in results.get(v, {}).get("workloads", {})
    ]


def ttft_verdict(ttft: dict[str, Any]) -> str:
    """ "met" or "missed by X ms" for the median TTFT against its target."""
    over = ttft["median_ms"] - ttft["target_ms"]
    return "met" if over <= 0 else f"missed by {over:.1f} ms"


def _ttft(results: dict[str, Any]) -> list[str]:
    present = _with(results, "TTFT")
    if not present:
        return []
    any_ttft = present[0][1]
    out = [
        "### TTFT time to first token added by PAI",
        "",
        f"`POST /api/pai/threads/{{id}}/messages` by a browser-like client (session cookie, "
        f"CSRF token, the thread's websocket open and synced) to daphne with the in-process "
        f"thread executor, until the model is asked (its stream opened; the model stamps "
        f"`time.time_ns()` into its one delta). {any_ttft['sends']} sends on fresh threads "
        f"after {any_ttft['warmup']} warm-up sends, one at a time. Times in ms, median / p95. "
        "*HTTP*: request sent until response read; *response → model*: the dispatch after "
        "commit, claim and context load (negative when the executor reached the model before "
        "the client had the response; the parts' medians need not add up); *first delta*: "
        "model asked until the delta arrived on the websocket; *HTTP floor*: an authenticated "
        "`GET /api/pai/threads/{id}` by the same client just before (what any API call costs "
        f"here). Target: median <= "
        f"{any_ttft['target_ms']:g} ms.",
        "",
    ]
    rows = [
        [
            label,
            _cells({"median": t["median_ms"], "p95": t["p95_ms"]}, bold=True),
            _cells(t["split"]["http_ms"]),
            _cells(t["split"]["response_to_model_ms"]),
            f"{t['model_before_response']}/{t['sends']}",
            _cells(t["first_delta_ms"]),
            _cells(t["split"]["http_floor_ms"]),
            f"**{ttft_verdict(t)}**",
        ]
        for label, t in present
    ]
    header = ["DB", "TTFT added", "HTTP", "response → model", "model before response"]
    header += ["first delta", "HTTP floor"]
    return [*out, *_rows_table([*header, "target"], rows), *_ttft_profiles(present)]


def _ttft_profiles(present: list[tuple[str, dict[str, Any]]]) -> list[str]:
    out: list[str] = []
    for label, t in present:
        prof = t.get("profile")
        if not prof:
            continue
        out += [
            "<details>",
            f"<summary>TTFT on {label}: the server under py-spy (--gil) during "
            f"{prof['sends']} sends and their runs (no websocket)</summary>",
            "",
            f"{prof['samples']} samples (100 Hz, only while a thread holds the GIL); per "
            "thread: " + ", ".join(f"{share}% {name}" for share, name in prof["threads"]),
            "",
        ]
        for kind in ("self", "inclusive"):
            out += [f"- {kind}: " + ", ".join(f"{n}% `{fn}`" for n, fn in prof[kind])]
        out += ["", "</details>", ""]
    return out


def _sql_added(
    plain: dict[str, Any], hooked: dict[str, Any], shorten: Callable[[str], str]
) -> list[list[str]]:
    """Statements per run the lifecycle run sends more (or fewer) than the plain one."""
    key = "pg_sql" if "pg_sql" in hooked["execution"] else "django_sql"
    counts: Counter[str] = Counter()
    for rep, sign in ((hooked, 1), (plain, -1)):
        for phase in ("accept", "execution"):
            for calls, sql in rep[phase].get(key, []):
                counts[shorten(sql)] += sign * calls
    changed = sorted((c, sql) for sql, c in counts.items() if abs(c) > 1e-9)
    return [[f"{c:+g}", f"`{sql.replace('|', '/')}`"] for c, sql in reversed(changed)]


def _w1l(results: dict[str, Any], shorten: Callable[[str], str]) -> list[str]:
    present = _with(results, "W1L")
    if not present:
        return []
    any_w1l = present[0][1]
    out = [
        "### W1L tool round trip with every lifecycle phase overridden",
        "",
        "W1 (same model, tool and sizes) run by an agent whose lifecycle overrides every phase "
        "with an `async def` no-op (`NoOpLifecycle`), next to the plain W1 agent: "
        f"{any_w1l['runs']} runs per repetition, {len(any_w1l['repetitions'])} repetitions of "
        "each, alternating. Times in ms per run, median / p95; *ratio* = lifecycle / plain "
        "total median of adjacent repetitions.",
        "",
    ]
    rows = []
    for label, w in present:
        plain = w["plain"]
        for i, (p, h) in enumerate(zip(plain["repetitions"], w["repetitions"], strict=True), 1):
            rows.append(
                [
                    label,
                    str(i),
                    _cells(p["total_ms"]),
                    _cells(h["total_ms"], bold=True),
                    f"{h['total_ms']['median'] / p['total_ms']['median']:.2f}",
                    _cells(p["exec_ms"]),
                    _cells(h["exec_ms"]),
                ]
            )
        r = w["ratio_to_w1_spread"]
        rows.append(
            [
                label,
                "ratio",
                "-",
                "-",
                f"**{r['median']:.2f}** ({r['min']:.2f}-{r['max']:.2f})",
                "-",
                f"engine alone {_cells(w['engine_only_ms'])}"
                f" (plain {_cells(plain['engine_only_ms'])})",
            ]
        )
    header = ["DB", "rep.", "plain total", "lifecycle total", "ratio"]
    out += _rows_table([*header, "plain execute", "lifecycle execute"], rows)
    rows = []
    for label, w in present:
        p, h = w["plain"]["repetitions"][0], w["repetitions"][0]
        for phase in ("accept", "execution"):
            rows.append(
                [
                    label,
                    phase,
                    f"{p[phase]['pg_equivalent_statements']:g} → "
                    f"**{h[phase]['pg_equivalent_statements']:g}**",
                    f"{p[phase]['commits']:g} → **{h[phase]['commits']:g}**",
                    f"{p[phase]['bytes_written'] / 1024:.1f} → "
                    f"{h[phase]['bytes_written'] / 1024:.1f}",
                ]
            )
    out += ["Counts per run, plain → lifecycle (statements incl. BEGIN/COMMIT):", ""]
    out += _rows_table(["DB", "phase", "statements", "commits", "KB written"], rows)
    for label, w in present:
        added = _sql_added(w["plain"]["repetitions"][0], w["repetitions"][0], shorten)
        if added:
            out += [
                "<details>",
                f"<summary>W1L: statements per run the lifecycle adds on {label}</summary>",
                "",
                *_rows_table(["calls/run", "statement"], added),
                "</details>",
                "",
            ]
    return out


def render_latency(results: dict[str, Any], shorten: Callable[[str], str] = str) -> list[str]:
    """The W1L and TTFT sections (empty when neither ran); ``shorten`` abbreviates SQL for
    a table cell (the report's own abbreviation)."""
    return [*_w1l(results, shorten), *_ttft(results)]
