"""``manage.py pai_recover``: re-dispatch runs whose lease expired (or that never started).

Once, it sweeps and exits (non-zero if the sweep failed or its dispatches could not reach the
broker). With ``--loop SECONDS`` it is the sweeper daemon: a sweep fails when the database or
the broker is away, is logged, and is retried with backoff; the loop itself never exits on it.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from pai_threads.execution.recovery import Sweep, Sweeper

# How long a single sweep waits for dispatches the broker refused before giving up on them.
FLUSH_SECONDS = 10.0


class Command(BaseCommand):
    help = (
        "Re-dispatch runs whose worker stopped (expired lease) and queued runs that never "
        "started. Safe to run anywhere, any time: a run is executed by one claim only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--loop",
            type=float,
            metavar="SECONDS",
            help="Repeat every SECONDS (a sweeper daemon that outlives database and broker "
            "outages).",
        )

    def handle(self, *args: Any, loop: float | None = None, **options: Any) -> None:
        if not loop:
            self._once()
            return
        sweeper = Sweeper(loop)
        self.stdout.write(f"sweeping every {loop:g}s")
        while True:
            sweep = sweeper.sweep()
            if sweep is not None and (sweep.run_ids or sweep.waiting):
                self._report(sweep)
            time.sleep(sweeper.next_delay())

    def _once(self) -> None:
        from pai_threads.executors import get_executor

        sweep = Sweeper(1.0).sweep()
        if sweep is None:
            raise CommandError("the sweep failed (see the log above)")
        self._report(sweep)
        flush = getattr(get_executor(), "flush", None)
        left = flush(FLUSH_SECONDS) if sweep.waiting and flush is not None else 0
        if left:
            raise CommandError(f"{left} dispatch(es) could not reach the broker")

    def _report(self, sweep: Sweep) -> None:
        self.stdout.write(f"re-dispatched {len(sweep.run_ids)} run(s)")
        for run_id in sweep.run_ids:
            self.stdout.write(f"  {run_id}")
        if sweep.waiting:
            self.stdout.write(f"  ({sweep.waiting} waiting for the broker)")
        self.stdout.flush()
