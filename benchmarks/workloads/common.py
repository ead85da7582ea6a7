"""What every workload needs: the driver context, sending, executing, measuring a phase."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from benchmarks.counting import Counts, QueryCounter
from benchmarks.database import DbStats, Probe

__all__ = ["USER_MESSAGE", "Bench", "Phase", "phase_summary"]

USER_MESSAGE = {"role": "user", "parts": [{"type": "text", "text": "Look up x, please."}]}


@dataclass
class Phase:
    """What one measured phase cost: Django-side counts, database-side stats, wall time."""

    counts: Counts = field(default_factory=Counts)
    db: DbStats | None = None
    seconds: float = 0.0


@dataclass(kw_only=True)
class Bench:
    """The driver's context: one database, one event loop for every run, the counters."""

    vendor: str  # "sqlite" | "postgresql"
    quick: bool
    # Repetitions per workload when the CLI runs one round of several (None: the workload's
    # own number); workloads that repeat read it through :meth:`reps`.
    repetitions: int | None = None
    counter: QueryCounter
    probe: Probe
    loop: asyncio.Runner
    redis_url: str | None = None
    database_url: str = ""
    notes: list[str] = field(default_factory=list)

    def reps(self, default: int) -> int:
        return default if self.repetitions is None else self.repetitions

    @property
    def identity(self) -> Any:
        from pai_threads.identity import Identity

        return Identity(scope_key="bench", data={})

    def new_thread(self, agent: str) -> str:
        from pai_threads import services

        return services.create_thread(self.identity, agent=agent).id

    def send(self, thread_id: str, *, dispatch: bool = False) -> str:
        from pai_threads import services

        result = services.send(self.identity, thread_id, USER_MESSAGE, dispatch=dispatch)
        if result.run is None:
            raise RuntimeError(f"benchmark send to {thread_id} started no run")
        return result.run.id

    def execute(self, run_id: str) -> None:
        """Execute one run as both executors do: claimed on the calling thread
        (``claim_now``, as a request's thread or a Celery task's does), then run on the
        shared loop (its store threads keep their connections)."""
        from pai_threads.execution.execute import aexecute_run, claim_now, worker_name

        claimed = claim_now(run_id, owner=worker_name())
        if claimed is None:
            raise RuntimeError(f"benchmark run {run_id} could not be claimed")
        outcome = self.loop.run(aexecute_run(run_id, claimed=claimed))
        if outcome is None or outcome.status != "completed":
            raise RuntimeError(f"benchmark run {run_id} ended {outcome}")

    def execute_all(self, run_ids: list[str]) -> None:
        """Execute runs concurrently on the shared loop (``asyncio.gather``)."""
        from pai_threads.execution.execute import aexecute_run

        async def all_runs() -> list[Any]:
            return await asyncio.gather(*(aexecute_run(r) for r in run_ids))

        outcomes = self.loop.run(all_runs())
        bad = [o for o in outcomes if o is None or o.status != "completed"]
        if bad:
            raise RuntimeError(f"{len(bad)} concurrent benchmark runs did not complete: {bad[:3]}")

    @contextmanager
    def measure(self) -> Iterator[Phase]:
        """Bracket a phase: counter snapshot + probe; nothing else may run meanwhile."""
        phase = Phase()
        self.probe.start()
        before = self.counter.snapshot()
        t0 = time.perf_counter()
        yield phase
        phase.seconds = time.perf_counter() - t0
        phase.counts = self.counter.snapshot() - before
        phase.db = self.probe.stop()


def phase_summary(phase: Phase, runs: int, *, top: int = 0) -> dict[str, Any]:
    """Per-run figures of a phase; with ``top``, the per-run statement list too."""
    c = phase.counts
    out: dict[str, Any] = {
        "statements": c.statements / runs,
        "pg_equivalent_statements": c.pg_statements / runs,
        "commits": c.transactions / runs,
        "explicit_commits": c.commits / runs,
        "autocommit_writes": c.autocommit_writes / runs,
        "rollbacks": c.rollbacks / runs,
    }
    db = phase.db
    if db is not None:
        out["bytes_written"] = db.bytes_written / runs
        if db.statements is not None:
            out["pg_statements"] = db.statements / runs
            out["pg_fk_checks"] = db.fk_checks / runs
            out["pg_client_statements"] = (db.statements - db.fk_checks) / runs
        if db.wal_by_kind:
            out["wal_by_kind"] = {k: v / runs for k, v in db.wal_by_kind.items()}
        if db.file_growth is not None:
            out["file_growth"] = db.file_growth / runs
    if top:
        out["django_sql"] = _per_run(c.by_sql, runs, top)
        if db is not None and db.by_query:
            out["pg_sql"] = _per_run(db.by_query, runs, top)
    return out


def _per_run(counts: dict[str, int], runs: int, top: int) -> list[list[Any]]:
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [[round(calls / runs, 3), " ".join(sql.split())[:2000]] for sql, calls in ordered]
