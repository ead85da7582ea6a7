"""What the runtime has been doing: runs by status, usage and cost, stuck and slow runs.

The report behind ``manage.py pai_stats``; every figure is one grouped query, so it stays
cheap on large tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, DurationField, ExpressionWrapper, F
from django.utils import timezone

from pai_threads.execution.recovery import find_stalled_runs
from pai_threads.models import Run, Step
from pai_threads.usage import Grouping, UsageTotals, usage_rollup

__all__ = ["RuntimeStats", "SlowRun", "collect_stats"]


@dataclass(frozen=True, slots=True)
class SlowRun:
    id: str
    agent: str
    status: str
    seconds: float


@dataclass(slots=True)
class RuntimeStats:
    """Runs created since ``since``: counts by status, usage per grouping, and the runs an
    operator should look at (stalled ones the sweeper would re-dispatch, the slowest)."""

    since: datetime
    runs_by_status: dict[str, int]
    usage: dict[str, list[UsageTotals]]
    stuck: list[str]
    slow: list[SlowRun] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat(),
            "runsByStatus": self.runs_by_status,
            "usage": {group: [row.as_json() for row in rows] for group, rows in self.usage.items()},
            "stuckRuns": self.stuck,
            "slowRuns": [
                {"id": r.id, "agent": r.agent, "status": r.status, "seconds": round(r.seconds, 3)}
                for r in self.slow
            ],
        }


def _slowest(since: datetime, at_least: float, limit: int) -> list[SlowRun]:
    took = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    rows = (
        Run.objects.filter(
            created_at__gte=since, finished_at__isnull=False, started_at__isnull=False
        )
        .annotate(took=took)
        .filter(took__gte=timedelta(seconds=at_least))
        .order_by("-took")
        .values_list("id", "agent_name", "status", "took")[:limit]
    )
    return [SlowRun(i, agent, status, took.total_seconds()) for i, agent, status, took in rows]


def collect_stats(
    *,
    days: float = 7,
    groups: tuple[Grouping, ...] = ("agent", "scope", "day"),
    slow_seconds: float = 60,
    limit: int = 20,
) -> RuntimeStats:
    """The report over the last ``days`` days (stuck runs whatever their age)."""
    since = timezone.now() - timedelta(days=days)
    by_status = dict(
        Run.objects.filter(created_at__gte=since)
        .values_list("status")
        .annotate(n=Count("id"))
        .order_by("status")
        .values_list("status", "n")
    )
    steps = Step.objects.filter(started_at__gte=since)
    return RuntimeStats(
        since=since,
        runs_by_status=by_status,
        usage={group: usage_rollup(group, steps=steps) for group in groups},
        stuck=find_stalled_runs(limit),
        slow=_slowest(since, slow_seconds, limit),
    )
