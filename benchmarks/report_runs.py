"""Rendering the single-process database workloads as Markdown, for
:func:`benchmarks.report.render`: W1 (tool round trip, with its counts, WAL and statements),
W2 (long thread) and W3 (concurrency)."""

from __future__ import annotations

from typing import Any

from benchmarks.report_format import VENDORS, abbreviate, fmt_kb, fmt_ms, fmt_n, table, wal_kinds

__all__ = ["render_w1", "render_w2", "render_w3"]


def render_w1(results: dict[str, Any]) -> list[str]:
    present = [
        (v, label) for v, label in VENDORS if "W1" in results.get(v, {}).get("workloads", {})
    ]
    if not present:
        return []
    any_w1 = results[present[0][0]]["workloads"]["W1"]
    out = [
        "### W1 tool round trip",
        "",
        f"New thread, send (dispatch off), execute on one event loop: step 1 calls "
        f'`lookup(q="x")`, step 2 streams 100 deltas of 4 characters. '
        f"{any_w1['runs']} runs per repetition after {any_w1['warmup']} warm-up runs, "
        f"{len(any_w1['repetitions'])} repetitions. Times in ms per run; total = send + execute. "
        "*Engine alone* is the same run on the in-memory store (no SQL, no thread hops): "
        "the rest of the total is the ORM store, the thread service and the hops.",
        "",
    ]
    rows = []
    for vendor, label in present:
        w1 = results[vendor]["workloads"]["W1"]
        for i, rep in enumerate(w1["repetitions"], 1):
            rows.append(
                [
                    label,
                    str(i),
                    fmt_ms(rep["send_ms"]["median"]),
                    f"{fmt_ms(rep['exec_ms']['median'])} / {fmt_ms(rep['exec_ms']['p95'])}",
                    f"**{fmt_ms(rep['total_ms']['median'])}** / {fmt_ms(rep['total_ms']['p95'])}",
                    f"{rep['runs_per_second']:.0f}",
                ]
            )
    for vendor, label in present:
        engine = results[vendor]["workloads"]["W1"].get("engine_only_ms")
        if engine:
            rows.append(
                [
                    label,
                    "engine alone",
                    "-",
                    "-",
                    f"{fmt_ms(engine['median'])} / {fmt_ms(engine['p95'])}",
                    "-",
                ]
            )
    out += table(
        [
            "DB",
            "rep.",
            "send median",
            "execute median / p95",
            "total median / p95",
            "runs/s (sequential)",
        ],
        rows,
    )
    out += [
        "Counts per run (identical in every repetition: "
        + ", ".join(
            f"{label} {'yes' if results[v]['workloads']['W1']['counts_stable'] else 'NO'}"
            for v, label in present
        )
        + "). *Statements* are what Django sent, BEGIN/COMMIT excluded; *+ BEGIN/COMMIT* adds "
        "them (as pg_stat_statements counts them); *pg_stat_statements* is the server's own "
        "count, which also includes the foreign-key checks PostgreSQL's triggers run (shown "
        "separately). Commits are durable transactions. Bytes: WAL on PostgreSQL, bytes the "
        "process wrote (WAL frames) on SQLite.",
        "",
    ]
    rows = []
    for vendor, label in present:
        w1 = results[vendor]["workloads"]["W1"]
        rep = w1["repetitions"][0]
        steps = w1["model_steps"]
        phases = [
            ("create thread (outside the budget)", rep["create_thread"], 1),
            ("accept (send)", rep["accept"], 1),
            ("execution (claim ... completion)", rep["execution"], 1),
        ]
        total = {
            k: rep["accept"].get(k, 0) + rep["execution"].get(k, 0)
            for k in rep["execution"]
            if isinstance(rep["execution"][k], int | float)
        }
        phases += [("**run total (accept + execution)**", total, 1)]
        phases += [("per model step (run total / 2)", total, steps)]
        for name, p, div in phases:
            pgss = (
                f"{fmt_n(p['pg_statements'] / div)} ({fmt_n(p['pg_fk_checks'] / div)} FK)"
                if "pg_statements" in p
                else "-"
            )
            rows.append(
                [
                    label,
                    name,
                    fmt_n(p["statements"] / div),
                    fmt_n(p["pg_equivalent_statements"] / div),
                    pgss,
                    fmt_n(p["commits"] / div),
                    fmt_kb(p["bytes_written"] / div),
                ]
            )
    out += table(
        [
            "DB",
            "phase",
            "statements",
            "+ BEGIN/COMMIT",
            "pg_stat_statements",
            "commits",
            "bytes written",
        ],
        rows,
    )
    out += [
        "The five commits of a run: accept (run + user message), claim (lease: one "
        "`UPDATE ... RETURNING` that also returns the input messages and, on PostgreSQL, the "
        "thread's context window), step 1 (assistant "
        "message with the tool call + Step row, before the tool runs; on PostgreSQL one "
        "data-modifying CTE), tool result (message update: one statement fenced by a locking "
        "`EXISTS` on the run row), step 2 + completion (answer, Step row and run outcome in "
        "one transaction, after the thread lock on PostgreSQL).",
        "",
    ]
    wal_rows = []
    for vendor, label in present:
        rep = results[vendor]["workloads"]["W1"]["repetitions"][0]
        for phase in ("accept", "execution"):
            kinds = rep[phase].get("wal_by_kind")
            if kinds:
                wal_rows.append([label, f"W1 {phase}", wal_kinds(kinds)])
        for s in results[vendor]["workloads"].get("W2", {}).get("sizes", []):
            if s.get("wal_by_kind"):
                wal_rows.append(
                    [label, f"W2 at {s['prior_messages']:,}", wal_kinds(s["wal_by_kind"])]
                )
    if wal_rows:
        out += [
            "WAL per run by kind (pg_walinspect): *Btree* is index maintenance, *Heap* the rows, "
            "*Transaction* the commit records.",
            "",
            *table(["DB", "what", "WAL bytes per run"], wal_rows),
        ]
    for vendor, label in present:
        rep = results[vendor]["workloads"]["W1"]["repetitions"][0]
        key = "pg_sql" if "pg_sql" in rep["execution"] else "django_sql"
        source = "pg_stat_statements" if key == "pg_sql" else "Django's execute wrapper"
        out += [
            "<details>",
            f"<summary>W1 statements per run on {label} ({source})</summary>",
            "",
        ]
        rows = [
            [phase, fmt_n(calls), f"`{abbreviate(sql)}`"]
            for phase in ("accept", "execution")
            for calls, sql in rep[phase].get(key, [])
        ]
        out += table(["phase", "calls/run", "statement"], rows)
        out += ["</details>", ""]
    return out


def render_w2(results: dict[str, Any]) -> list[str]:
    present = [
        (v, label) for v, label in VENDORS if "W2" in results.get(v, {}).get("workloads", {})
    ]
    if not present:
        return []
    out = [
        "### W2 long thread",
        "",
        "One more send with a one-step text answer (100 deltas) to a thread already holding N "
        "committed messages (N/2 completed runs of a user message and an answer of ~200 "
        "characters). Every size's thread is filled first, then the sizes take turns, one run "
        "each per round (the machine's drift weighs on all alike). Each run is measured on its "
        "own and deleted afterwards, so every run sees exactly N messages. N = 0 is the "
        "baseline: the same run on a new thread. "
        "Bytes are per run (median, max); context = the engine's `load_context` and the "
        "conversion to model messages, timed alone (median).",
        "",
    ]
    rows = []
    for vendor, label in present:
        for s in results[vendor]["workloads"]["W2"]["sizes"]:
            ctx = s.get("context")
            stmts = fmt_n(s["pg_equivalent_statements"]["median"])
            if "pg_statements" in s:
                stmts += f" ({fmt_n(s['pg_statements']['median'])})"
            rows.append(
                [
                    label,
                    f"{s['prior_messages']:,}",
                    str(s["runs"]),
                    f"**{fmt_ms(s['total_ms']['median'])}** / {fmt_ms(s['total_ms']['p95'])}",
                    f"{s['vs_new_thread']:.2f}x",
                    stmts,
                    fmt_n(s["commits"]["median"]),
                    f"{fmt_kb(s['bytes_written']['median'])}, {fmt_kb(s['bytes_written']['max'])}",
                    f"{fmt_ms(ctx['load_context_ms'])} + {fmt_ms(ctx['to_model_messages_ms'])}"
                    if ctx
                    else "-",
                ]
            )
    out += table(
        [
            "DB",
            "prior messages",
            "runs",
            "median / p95 ms",
            "vs new thread",
            "statements + BEGIN/COMMIT (pg_stat_statements)",
            "commits",
            "bytes written",
            "context: load + convert ms",
        ],
        rows,
    )
    return out


def render_w3(results: dict[str, Any]) -> list[str]:
    present = [
        (v, label) for v, label in VENDORS if "W3" in results.get(v, {}).get("workloads", {})
    ]
    if not present:
        return []
    out = [
        "### W3 concurrency",
        "",
        "W1 on N new threads at once. *In-process*: `asyncio.gather` of `aexecute_run` on one "
        "event loop (runs sent first, not timed). *Celery*: a real `celery worker --pool "
        "threads --concurrency N` process on Redis; the time runs from the first send to the "
        "last run's `finished_at` (sends included). Seconds: median (min-max) over the "
        "repetitions.",
        "",
    ]
    rows = []
    for vendor, label in present:
        w3 = results[vendor]["workloads"]["W3"]
        for mode, name in (("in_process", "in-process"), ("celery", "Celery worker")):
            r = w3.get(mode)
            if not r:
                rows.append([label, name, "-", "skipped (no Redis)", "-", "-"])
                continue
            sec, rps = r["seconds"], r["runs_per_second"]
            memory = "-"
            if "worker_peak_rss_mb" in r:
                memory = (
                    f"{r['worker_peak_rss_mb']:.0f} MB "
                    f"(after warm-up {r['worker_rss_after_warmup_mb']:.0f} MB)"
                )
            rows.append(
                [
                    label,
                    name,
                    str(r["concurrent"]),
                    f"**{sec['median']:.2f}** ({sec['min']:.2f}-{sec['max']:.2f}), "
                    f"{r['repetitions']} rep.",
                    f"{rps['median']:.0f}",
                    memory,
                ]
            )
    out += table(
        ["DB", "executor", "runs at once", "total seconds", "runs/s", "worker peak RSS"], rows
    )
    return out
