"""``manage.py pai_stats``: runs by status, tokens and cost by agent, scope and day, and the
runs to look at (stalled, slow). ``--json`` prints the same report for scripts."""

from __future__ import annotations

import json
from typing import Any, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser

from pai_threads.operations import RuntimeStats, collect_stats
from pai_threads.usage import Grouping, UsageTotals

GROUPS = ("agent", "scope", "day", "model", "thread", "run")


class Command(BaseCommand):
    help = (
        "Report what the runtime did: runs by status, tokens and cost (PAI['MODEL_PRICES']) "
        "by agent, scope and day, stalled runs the sweeper would re-dispatch, the slowest runs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=float, default=7, help="Look back this many days (7).")
        parser.add_argument(
            "--by",
            default="agent,scope,day",
            help=f"Comma-separated usage groupings, of {', '.join(GROUPS)} (agent,scope,day).",
        )
        parser.add_argument(
            "--slow-seconds", type=float, default=60, help="A run this long is slow (60)."
        )
        parser.add_argument("--limit", type=int, default=20, help="Rows per list (20).")
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        groups = tuple(name.strip() for name in options["by"].split(",") if name.strip())
        unknown = [name for name in groups if name not in GROUPS]
        if unknown:
            raise CommandError(f"unknown grouping(s) {unknown}; use {', '.join(GROUPS)}")
        if options["days"] <= 0 or options["limit"] <= 0:
            raise CommandError("--days and --limit must be positive")
        stats = collect_stats(
            days=options["days"],
            groups=cast(tuple[Grouping, ...], groups),
            slow_seconds=options["slow_seconds"],
            limit=options["limit"],
        )
        if options["json"]:
            self.stdout.write(json.dumps(stats.as_json(), indent=2))
            return
        self._print(stats)

    def _print(self, stats: RuntimeStats) -> None:
        out = self.stdout.write
        out(f"since {stats.since:%Y-%m-%d %H:%M} UTC")
        runs = ", ".join(f"{status} {n}" for status, n in stats.runs_by_status.items())
        out(f"runs: {runs or 'none'}")
        for group, rows in stats.usage.items():
            out(f"\nusage by {group}:")
            for row in rows:
                out("  " + _usage_line(row))
            if not rows:
                out("  (no steps)")
        out(f"\nstalled runs: {len(stats.stuck)}")
        for run_id in stats.stuck:
            out(f"  {run_id}")
        out(f"slow runs: {len(stats.slow)}")
        for run in stats.slow:
            out(f"  {run.id} {run.agent} {run.status} {run.seconds:.1f}s")


def _usage_line(row: UsageTotals) -> str:
    data = row.as_json()
    cost = data["cost"] if data["cost"] is not None else "unpriced"
    return (
        f"{data['key']}: {data['steps']} steps, {data['inputTokens']} in / "
        f"{data['outputTokens']} out tokens, cost {cost}"
    )
