"""Rendering the websocket workloads as Markdown, for :func:`benchmarks.report.render`:
W4 (streaming delivery), W5 (worker capacity) and their py-spy profiles."""

from __future__ import annotations

from typing import Any

from benchmarks.report_format import fmt_ms, present, table

__all__ = [
    "ARRANGEMENT_LABELS",
    "completed_cell",
    "deltas_cell",
    "render_streaming",
    "resync_notes",
]


ARRANGEMENT_LABELS = {"embedded": "embedded", "celery": "Celery + Redis"}


def _lat(d: dict[str, float]) -> str:
    return f"{fmt_ms(d['median'])} / **{fmt_ms(d['p99'])}** / {fmt_ms(d['max'])}"


def _streaming_levels(results: dict[str, Any], workload: str) -> list[tuple[str, str, Any]]:
    """(vendor label, arrangement name, arrangement result) for every measured arrangement."""
    out = []
    for vendor, label in present(results, workload):
        for name, arr in results[vendor]["workloads"][workload]["arrangements"].items():
            out.append((label, name, arr))
    return out


def _cpu_cell(level: dict[str, Any]) -> str:
    return ", ".join(
        f"{proc} {seconds:.1f} s ({seconds / level['wall_s']:.2f} cores)"
        for proc, seconds in level["cpu_s"].items()
    )


def _w4(results: dict[str, Any]) -> list[str]:
    rows_in = _streaming_levels(results, "W4")
    if not rows_in:
        return []
    first = rows_in[0][2]["levels"][-1]
    out = [
        "### W4 streaming delivery",
        "",
        f"Concurrent streams of {first['deltas']} text deltas, one every {first['every_ms']} ms "
        "(`StampedModel`), each on its own thread and websocket, against a real daphne server "
        "on loopback; clients are `websockets` connections in the benchmark process, "
        "authenticated by a session cookie, each sending its message over the socket. "
        "*Delivery* = client receive time - the time the model yielded the delta (both "
        "`time.time_ns()`, stamped into the delta text), at the delta's first arrival: a "
        "client the server resyncs gets a snapshot and the open message replayed from its "
        "first chunk, and keeps each delta once (*deltas received*; the frames in "
        "parentheses when replays added some). *From due* also counts the time the "
        "delta waited before the model could yield it (the worker's loop falling behind its "
        "provider), *lag* is that wait alone. Streams start together after every send is "
        f"accepted, spread over {first['stagger_s']:g} s. *Arrangements*: "
        + "; ".join(f"*{ARRANGEMENT_LABELS[k]}* = {v}" for k, v in _arrangement_texts().items())
        + ". CPU: seconds of each server process over the level (cores = CPU s / wall s).",
        "",
    ]
    rows = []
    for label, name, arr in rows_in:
        for lv in arr["levels"]:
            rows.append(
                [
                    label,
                    ARRANGEMENT_LABELS.get(name, name),
                    str(lv["streams"]),
                    deltas_cell(lv),
                    _lat(lv["delivery_ms"]),
                    f"{fmt_ms(lv['from_due_ms']['median'])} / {fmt_ms(lv['from_due_ms']['p99'])}",
                    fmt_ms(lv["lag_ms"]["p99"]),
                    _cpu_cell(lv),
                    f"{lv['client_cpu_s']:.1f} s",
                ]
            )
    out += table(
        [
            "DB",
            "arrangement",
            "streams",
            "deltas received",
            "delivery ms median / p99 / max",
            "from due median / p99",
            "lag p99",
            "server CPU",
            "client CPU",
        ],
        rows,
    )
    out += _profiles(rows_in, "W4", "the largest level, run again under py-spy")
    return out


def _arrangement_texts() -> dict[str, str]:
    from benchmarks.streaming import ARRANGEMENTS

    return ARRANGEMENTS


def _w5(results: dict[str, Any]) -> list[str]:
    rows_in = _streaming_levels(results, "W5")
    if not rows_in:
        return []
    first = rows_in[0][2]["levels"][0]
    limit = results[present(results, "W5")[0][0]]["workloads"]["W5"]["limit_ms"]
    out = [
        "### W5 worker capacity",
        "",
        f"N concurrent runs on one fresh server, each streaming {first['deltas']} deltas one "
        f"every {first['every_ms']} ms ({first['deltas'] * first['every_ms'] / 1000:g} s), "
        "N stepped up until a level is not held (a miss is measured twice before it counts: "
        "shared machines have noisy neighbours). *Held*: every run completed and every "
        "delta arrived, in order (each counted once: a client the server resyncs gets a "
        "snapshot and the open message replayed from its first chunk, as "
        "`benchmarks/streaming.py` counts; *completed* names the resyncs and the delta "
        f"frames they replayed), delivery p99 < {limit:g} ms, and the worker kept the model's pace "
        f"(lag p99 < {limit:g} ms). The *worker* is the process that executes the runs: "
        "daphne itself in the embedded arrangement (one process serves the websockets and "
        "runs the engine on its background loop), the Celery worker (`--pool threads`, runs on "
        "its background loop) in the production one, where daphne only delivers. CPU and "
        "RSS are the worker's, from `/proc`: CPU seconds over the level / N, and (peak RSS "
        "while streaming - RSS before the level) / N.",
        "",
    ]
    rows = []
    for label, name, arr in rows_in:
        for lv in arr["levels"]:
            exe = lv["executor_process"]
            rows.append(
                [
                    label,
                    ARRANGEMENT_LABELS.get(name, name),
                    str(lv["streams"]),
                    _held_cell(lv),
                    _lat(lv["delivery_ms"]),
                    fmt_ms(lv["lag_ms"]["p99"]),
                    completed_cell(lv),
                    f"{lv['cpu_s_per_run']:.3f} s",
                    f"{lv['cpu_s'][exe] / lv['wall_s']:.2f}",
                    f"{lv['rss_mb_per_run']:.2f} MB",
                    f"{lv['rss_peak_mb'].get(exe, 0):.0f} MB",
                ]
            )
    out += table(
        [
            "DB",
            "arrangement",
            "N",
            "held",
            "delivery ms median / p99 / max",
            "lag p99",
            "completed",
            "worker CPU per run",
            "worker cores",
            "worker RSS per run",
            "worker peak RSS",
        ],
        rows,
    )
    summary = []
    for label, name, arr in rows_in:
        capped = " (the cap: not stepped further)" if arr["capped"] else ""
        summary.append(
            f"- {label}, {ARRANGEMENT_LABELS.get(name, name)}: largest N held "
            f"**{arr['max_held']}**{capped}."
        )
    out += [*summary, ""]
    out += _profiles(rows_in, "W5", "the first level not held, run again under py-spy")
    return out


def _held_cell(level: dict[str, Any]) -> str:
    first = level.get("first_attempt")
    retried = f" (2nd attempt; 1st: {first['why_not']})" if first else ""
    return ("**yes**" if level["held"] else f"no: {level['why_not']}") + retried


def _profiles(rows_in: list[tuple[str, str, Any]], workload: str, what: str) -> list[str]:
    out: list[str] = []
    for label, name, arr in rows_in:
        profile = arr.get("profile")
        if not profile:
            continue
        streams = arr.get("profiled_streams") or max(lv["streams"] for lv in arr["levels"])
        out += [
            "<details>",
            f"<summary>{workload} profile: {label}, {ARRANGEMENT_LABELS.get(name, name)}, "
            f"{streams} streams ({what})</summary>",
            "",
            "py-spy `record --gil --threads --nonblocking -r 100`: samples taken while a "
            "thread held the GIL, i.e. where the process's CPU went. Shares are % of those "
            "samples.",
            "",
        ]
        for proc, prof in profile.items():
            if not prof:
                continue
            out += [f"*{proc}* ({prof['samples']} samples): threads "]
            out[-1] += ", ".join(f"{t.split(': ', 1)[-1]} {pct}%" for pct, t in prof["threads"])
            out += [""]
            rows = [
                [f"{a[0]}%", f"`{a[1]}`", f"{b[0]}%", f"`{b[1]}`"]
                for a, b in zip(prof["self"], prof["inclusive"], strict=False)
            ]
            out += table(["self", "function", "inclusive", "function"], rows)
        out += ["</details>", ""]
    return out


def render_streaming(results: dict[str, Any]) -> list[str]:
    return [*_w4(results), *_w5(results)]


def completed_cell(level: dict[str, Any]) -> str:
    """Runs completed, and why clients got more delta frames than were sent: steps
    streamed again (``reset-step`` frames), runs claimed more than once, and resyncs (a
    snapshot, then the open message replayed from its first chunk)."""
    cell = f"{level['completed']}/{level['streams']}"
    extra = []
    if level.get("step_resets"):
        extra.append(f"{level['step_resets']} step resets")
    if level.get("reattempted_runs"):
        extra.append(f"{level['reattempted_runs']} runs re-claimed")
    extra += resync_notes(level)
    return f"{cell} ({', '.join(extra)})" if extra else cell


def resync_notes(level: dict[str, Any]) -> list[str]:
    """The level's resyncs and what they replayed (results written before these counts
    existed have none)."""
    resyncs = level.get("resyncs")
    if not resyncs:
        return []
    clients = level.get("resynced_streams", 0)
    note = f"{resyncs} resyncs of {clients} clients"
    replayed = level.get("replayed_frames", 0)
    if replayed:
        note += (
            f": {replayed:,} delta frames replayed, {level.get('repeated_frames', 0):,} "
            "of deltas the client had"
        )
    return [note]


def deltas_cell(level: dict[str, Any]) -> str:
    """Deltas the clients have (each once) of those sent, and the frames they took when a
    resync replayed some (``delta_frames``: results from before it counted every frame)."""
    cell = f"{level['deltas_received']:,}/{level['deltas_expected']:,}"
    frames = level.get("delta_frames", level["deltas_received"])
    return f"{cell} ({frames:,} frames)" if frames != level["deltas_received"] else cell
