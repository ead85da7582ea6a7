"""``manage.py pai_recover``: re-dispatch runs whose lease expired (or that never started)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from pai_threads.recovery import recover_runs


class Command(BaseCommand):
    help = (
        "Re-dispatch runs whose worker stopped (expired lease) and queued runs that never "
        "started. Safe to run anywhere, any time: a run is executed by one claim only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--loop", type=float, metavar="SECONDS", help="Repeat every SECONDS (a sweeper daemon)."
        )

    def handle(self, *args: Any, loop: float | None = None, **options: Any) -> None:
        while True:
            run_ids = recover_runs()
            self.stdout.write(f"re-dispatched {len(run_ids)} run(s)")
            for run_id in run_ids:
                self.stdout.write(f"  {run_id}")
            if not loop:
                return
            time.sleep(loop)
