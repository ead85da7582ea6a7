"""``manage.py pai_export``: threads as JSON Lines, to stdout or a file.

Exit codes: 0 written; 1 a thread was not found or its bytes could not be read (nothing
written to ``--output``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from pai_threads.models import Thread
from pai_threads.operations.portability import PortabilityError, export_threads


class Command(BaseCommand):
    help = (
        "Export threads with their runs, attempts, steps, messages, queue items, pending "
        "actions and files (bytes base64) as JSON Lines; pai_import reads it back exactly."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("thread_ids", nargs="*", metavar="THREAD_ID")
        parser.add_argument("--scope", metavar="KEY", help="Export every thread of this scope.")
        parser.add_argument(
            "--output", "-o", metavar="FILE", help="Write to FILE instead of standard output."
        )
        parser.add_argument(
            "--json", action="store_true", help="With --output: print a JSON summary."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        ids = list(options["thread_ids"])
        if options["scope"]:
            scoped = Thread.objects.filter(scope_key=options["scope"]).order_by("created_at", "id")
            ids += list(scoped.values_list("id", flat=True))
        if not ids:
            raise CommandError("name thread ids or a --scope that has threads")
        target = options["output"]
        try:
            if target is None:
                summary = export_threads(ids, self.stdout)
                return
            path = Path(target)
            partial = path.with_name(path.name + ".partial")
            with partial.open("w", encoding="utf-8") as handle:
                summary = export_threads(ids, handle)
            partial.replace(path)  # a failed export leaves no file that looks complete
        except PortabilityError as exc:
            if target is not None:
                Path(target + ".partial").unlink(missing_ok=True)
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps({**summary.as_json(), "output": target}, indent=2))
        else:
            counts = ", ".join(f"{kind} {n}" for kind, n in summary.counts.items())
            sys.stderr.write(f"exported {len(summary.threads)} thread(s) to {target}: {counts}\n")
