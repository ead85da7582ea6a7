"""``manage.py pai_purge``: delete old, archived or one scope's threads and unreferenced files.

Exit codes: 0 done; 1 bad criteria; 3 done, but some threads were kept because a run was
active (listed with the reason). ``--dry-run`` lists what would go and changes nothing.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from pai_threads.operations import PurgeError, PurgeReport, purge

SKIPPED_EXIT = 3


class Command(BaseCommand):
    help = (
        "Delete threads (with their runs, messages, actions and files) by last activity "
        "(--older-than), archived state (--archived) and scope (--scope), all given criteria "
        "combined; --orphan-files deletes files no message refers to, and their bytes. A thread "
        "with an active run is kept unless --cancel-active. Exit 3 when threads were kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=float,
            metavar="DAYS",
            help="Threads with no activity (send, run start or end) for DAYS days.",
        )
        parser.add_argument("--archived", action="store_true", help="Archived threads only.")
        parser.add_argument("--scope", metavar="KEY", help="Threads (and files) of this scope.")
        parser.add_argument(
            "--orphan-files",
            action="store_true",
            help="Also delete files no message or queued input refers to.",
        )
        parser.add_argument(
            "--orphan-grace-hours",
            type=float,
            default=24,
            help="Keep orphan files younger than this: an upload not sent yet (24).",
        )
        parser.add_argument(
            "--cancel-active",
            action="store_true",
            help="Cancel a queued or waiting run through the runtime and delete its thread; a "
            "running run is asked to stop and its thread left for the next purge.",
        )
        parser.add_argument("--dry-run", action="store_true", help="List, delete nothing.")
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["older_than"]
        try:
            report = purge(
                older_than=None if days is None else timedelta(days=days),
                archived=options["archived"],
                scope=options["scope"],
                orphan_files=options["orphan_files"],
                orphan_grace=timedelta(hours=options["orphan_grace_hours"]),
                cancel_active=options["cancel_active"],
                dry_run=options["dry_run"],
            )
        except PurgeError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(report.as_json(), indent=2))
        else:
            self._print(report)
        if report.skipped:
            raise CommandError(
                f"{len(report.skipped)} thread(s) kept: a run is active", returncode=SKIPPED_EXIT
            )

    def _print(self, report: PurgeReport) -> None:
        verb = "would delete" if report.dry_run else "deleted"
        out = self.stdout.write
        out(f"{verb} {len(report.threads)} thread(s)")
        for thread in report.threads:
            out(f"  {thread.id} {thread.scope} {thread.agent} {thread.last_activity:%Y-%m-%d}")
        size = sum(f.byte_size for f in report.files)
        out(f"{verb} {len(report.files)} orphan file(s), {size} bytes")
        for file in report.files:
            out(f"  {file.id} {file.scope} {file.byte_size} bytes")
        for run_id in report.cancelled_runs:
            out(f"cancelled run {run_id}")
        for thread_id, reason in report.skipped.items():
            out(f"kept {thread_id}: {reason}")
