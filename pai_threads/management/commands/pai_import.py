"""``manage.py pai_import``: threads from a ``pai_export`` file, whole or not at all.

Exit codes: 0 imported (or, with ``--dry-run``, importable); 1 the input is malformed,
truncated or of another version, or a row already exists: nothing was imported.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from pai_threads.operations.portability import PortabilityError, import_threads


class Command(BaseCommand):
    help = (
        "Import threads exported by pai_export, ids included, in one transaction; --scope "
        "moves them to another scope. An existing id is an error and nothing is imported."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("input", metavar="FILE", help="The export, or - for standard input.")
        parser.add_argument("--scope", metavar="KEY", help="Rewrite every row's scope to KEY.")
        parser.add_argument(
            "--dry-run", action="store_true", help="Check everything, import nothing."
        )
        parser.add_argument("--json", action="store_true", help="Print the summary as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        source = options["input"]
        try:
            if source == "-":
                summary = import_threads(
                    sys.stdin, scope=options["scope"], dry_run=options["dry_run"]
                )
            else:
                with open(source, encoding="utf-8") as handle:
                    summary = import_threads(
                        handle, scope=options["scope"], dry_run=options["dry_run"]
                    )
        except OSError as exc:
            raise CommandError(f"cannot read {source}: {exc.strerror}") from None
        except PortabilityError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(summary.as_json(), indent=2))
            return
        verb = "would import" if summary.dry_run else "imported"
        counts = ", ".join(f"{kind} {n}" for kind, n in summary.counts.items())
        self.stdout.write(f"{verb} {len(summary.threads)} thread(s): {counts}")
        for thread_id in summary.threads:
            self.stdout.write(f"  {thread_id}")
