"""W2, the long thread: one more one-step send to a thread that already holds N messages.

Threads are pre-filled with ``bulk_create`` (N/2 completed runs, each a user message and an
assistant answer of ~200 characters) and analyzed, then the sizes take turns (one run each
per round) and each measured run is send + execute,
bracketed on its own (pg_stat_statements reset, WAL position, Django counters), and deleted again
afterwards (unmeasured) so every run sees exactly N prior messages. The baseline is the
same one-step run on a new thread. A breakdown at the largest size times ``load_context``
and the model-message conversion alone: the engine loads the whole context each run.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.stats import median, percentile, spread
from benchmarks.workloads.common import Bench, phase_summary

__all__ = ["run"]

AGENT = "bench_w2"
TEXT = ("The quick brown fox jumps over the lazy dog while benchmarks count bytes. " * 3)[:200]


def _plan(bench: Bench) -> list[tuple[int, int]]:
    """(prior messages, measured runs); 0 is the new-thread baseline."""
    if bench.quick:
        return [(0, 3), (100, 3), (1_000, 3), (10_000, 3)]
    return [(0, 50), (100, 50), (1_000, 50), (10_000, 50)]


def prefill(bench: Bench, messages: int) -> str:
    """A thread with ``messages`` committed messages in ``messages // 2`` completed runs."""
    from django.utils import timezone

    from pai_agents.ids import new_id
    from pai_threads.models import Message, Run

    thread_id = bench.new_thread(AGENT)
    now = timezone.now()
    runs = [
        Run(
            thread_id=thread_id,
            scope_key="bench",
            agent_name=AGENT,
            status=Run.Status.COMPLETED,
            step_count=1,
            attempt=1,
            started_at=now,
            finished_at=now,
        )
        for _ in range(messages // 2)
    ]
    Run.objects.bulk_create(runs, batch_size=1000)
    rows = []
    for run in runs:
        for role, producer, relation, step in (
            ("user", "send", "input", None),
            ("assistant", "model", "output", 0),
        ):
            rows.append(
                Message(
                    message_id=new_id("msg"),
                    thread_id=thread_id,
                    scope_key="bench",
                    run_id=run.id,
                    role=role,
                    parts=[{"type": "text", "text": TEXT}],
                    producer=producer,
                    relation=relation,
                    step_index=step,
                )
            )
    Message.objects.bulk_create(rows, batch_size=1000)
    _analyze(bench)
    return thread_id


def _analyze(bench: Bench) -> None:
    """Refresh the planner's statistics, as autovacuum's analyze does in production once a
    table has changed enough (it is off here, so that WAL counts are the runtime's alone).
    Without them PostgreSQL takes a 10,000-message thread for a tiny one and sorts it whole
    instead of reading the newest context window off the index."""
    if bench.vendor != "postgresql":
        return
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE pai_threads_message, pai_threads_run, pai_threads_step")


def _one_run(bench: Bench, thread_id: str) -> tuple[float, float, Any]:
    """Send + execute, measured; then delete the run so the thread keeps its size."""
    from pai_threads.models import Run

    with bench.measure() as phase:
        t0 = time.perf_counter()
        run_id = bench.send(thread_id)
        t1 = time.perf_counter()
        bench.execute(run_id)
        t2 = time.perf_counter()
    Run.objects.filter(id=run_id).delete()
    return (t2 - t0) * 1000, (t2 - t1) * 1000, phase


def _context_breakdown(bench: Bench, thread_id: str, repeat: int) -> dict[str, float]:
    """What loading and converting the whole history costs, without the rest of a run."""
    from pai_agents.engine.store import Lease
    from pai_agents.messages.model_messages import prune_reasoning, to_model_messages
    from pai_threads.store.thread_store import ORMThreadStore

    store = ORMThreadStore()
    lease = Lease(run_id="-", owner="bench", token=0, thread_id=thread_id, scope_key="bench")
    load_ms: list[float] = []
    convert_ms: list[float] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        history = store.load_context_sync(lease)
        t1 = time.perf_counter()
        prune_reasoning(to_model_messages(history))
        t2 = time.perf_counter()
        load_ms.append((t1 - t0) * 1000)
        convert_ms.append((t2 - t1) * 1000)
    return {
        "messages": len(history),
        "load_context_ms": median(load_ms),
        "to_model_messages_ms": median(convert_ms),
    }


def run(bench: Bench) -> dict[str, Any]:
    """Every size's thread is filled first; then the sizes take turns, one run each per
    round, so a machine that slows down or speeds up meanwhile (shared 2-core machines do)
    weighs on every size alike instead of on whichever was measured then."""
    warm = prefill(bench, 0)
    for _ in range(1 if bench.quick else 5):
        _one_run(bench, warm)

    plan = _plan(bench)
    threads: list[str] = []
    fill_seconds: list[float] = []
    for prior, _ in plan:
        t0 = time.perf_counter()
        threads.append(prefill(bench, prior))
        fill_seconds.append(time.perf_counter() - t0)
    total_ms: list[list[float]] = [[] for _ in plan]
    exec_ms: list[list[float]] = [[] for _ in plan]
    per_run: list[list[dict[str, Any]]] = [[] for _ in plan]
    for round_ in range(max(runs for _, runs in plan)):
        for i, (_, runs) in enumerate(plan):
            if round_ < runs:
                total, execute, phase = _one_run(bench, threads[i])
                total_ms[i].append(total)
                exec_ms[i].append(execute)
                per_run[i].append(phase_summary(phase, 1))

    sizes: list[dict[str, Any]] = []
    for i, (prior, runs) in enumerate(plan):
        entry = _size_entry(prior, runs, fill_seconds[i], total_ms[i], exec_ms[i], per_run[i])
        if prior:
            entry["context"] = _context_breakdown(bench, threads[i], 3 if bench.quick else 10)
        sizes.append(entry)

    baseline = sizes[0]["total_ms"]["median"]
    for entry in sizes:
        entry["vs_new_thread"] = entry["total_ms"]["median"] / baseline
    return {"sizes": sizes}


def _size_entry(
    prior: int,
    runs: int,
    fill_seconds: float,
    total_ms: list[float],
    exec_ms: list[float],
    per_run: list[dict[str, Any]],
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "prior_messages": prior,
        "runs": runs,
        "prefill_seconds": fill_seconds,
        "total_ms": {"median": median(total_ms), "p95": percentile(total_ms, 95)},
        "exec_ms": {"median": median(exec_ms), "p95": percentile(exec_ms, 95)},
        "bytes_written": spread([r["bytes_written"] for r in per_run]),
        "statements": spread([r["statements"] for r in per_run]),
        "pg_equivalent_statements": spread([r["pg_equivalent_statements"] for r in per_run]),
        "commits": spread([r["commits"] for r in per_run]),
    }
    if "pg_statements" in per_run[0]:
        entry["pg_statements"] = spread([r["pg_statements"] for r in per_run])
    if "wal_by_kind" in per_run[-1]:
        entry["wal_by_kind"] = per_run[-1]["wal_by_kind"]  # one run's, for the breakdown
    if "file_growth" in per_run[0]:
        entry["file_growth"] = spread([r["file_growth"] for r in per_run])
    return entry
