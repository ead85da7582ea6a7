"""``manage.py pai_check``: a check-up of every registered agent (model, schemas, tools,
prices) on top of Django's ``pai`` system checks; ``--ping`` makes one tiny model call per
agent. Exits non-zero when anything fails, so deploy scripts can gate on it."""

from __future__ import annotations

import json
from typing import Any

from django.core import checks
from django.core.management.base import BaseCommand, CommandError, CommandParser

from pai_threads.operations import AgentCheckup, check_agents, check_prices


class Command(BaseCommand):
    help = (
        "Check every agent in PAI['AGENTS']: the model resolves, tool and metadata schemas "
        "are canonical JSON, tool options name real tools, PAI['MODEL_PRICES'] parses; "
        "with --ping, one tiny model call each. Runs the 'pai' system checks too."
    )
    requires_system_checks: list[str] = []  # reported below, as part of the result

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--ping", action="store_true", help="One tiny model call per agent.")
        parser.add_argument(
            "--timeout", type=float, default=20.0, help="Seconds a --ping may take (20)."
        )
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        findings = checks.run_checks(tags=["pai"])
        system = [f"{m.id}: {m.msg}" for m in findings if m.level >= checks.ERROR]
        warnings = [f"{m.id}: {m.msg}" for m in findings if m.level < checks.ERROR]
        agents = [] if system else check_agents(ping=options["ping"], timeout=options["timeout"])
        prices = check_prices()
        ok = not system and not prices and all(agent.ok for agent in agents)
        if options["json"]:
            result = {
                "ok": ok,
                "systemChecks": {"errors": system, "warnings": warnings},
                "prices": prices,
                "agents": [agent.as_json() for agent in agents],
            }
            self.stdout.write(json.dumps(result, indent=2))
        else:
            self._print(system + prices, warnings, agents)
        if not ok:
            raise CommandError("pai_check found problems", returncode=1)

    def _print(self, errors: list[str], warnings: list[str], agents: list[AgentCheckup]) -> None:
        out = self.stdout.write
        for line in errors:
            out(f"ERROR {line}")
        for line in warnings:
            out(f"warning {line}")
        for agent in agents:
            out(f"{'ok  ' if agent.ok else 'FAIL'} {agent.name} ({agent.model or 'no model'})")
            out(f"     tools: {', '.join(agent.tools) or 'none'}")
            for problem in agent.problems:
                out(f"     problem: {problem}")
            for note in agent.notes:
                out(f"     note: {note}")
            if agent.ping is not None:
                ping = agent.ping
                result = f"{ping['ms']} ms" if ping.get("ok") else ping.get("error")
                out(f"     ping: {result}")
