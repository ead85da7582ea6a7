"""``manage.py pai_stats`` (issue 12, point 4): runs by status, usage and cost by grouping,
stalled and slow runs, as text and as JSON; bad arguments are clear errors."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from pai_threads.models import Run, Step, Thread

pytestmark = pytest.mark.django_db(transaction=True)


def _run(scope: str, status: str, seconds: float, *, agent: str = "demo") -> Run:
    thread = Thread.objects.create(scope_key=scope, agent_name=agent)
    now = timezone.now()
    run = Run.objects.create(
        thread=thread,
        scope_key=scope,
        agent_name=agent,
        status=status,
        started_at=now - timedelta(seconds=seconds),
        finished_at=now if status in {"completed", "failed", "cancelled"} else None,
    )
    Step.objects.create(
        run=run,
        index=0,
        request={"provider": "openai", "modelId": "gpt-x"},
        usage={"inputTokens": 100, "outputTokens": 10},
        finish_reason="stop",
        started_at=now - timedelta(seconds=seconds),
        finished_at=now,
    )
    return run


def _stats(*args: str) -> Any:
    out = StringIO()
    call_command("pai_stats", *args, stdout=out)
    return out.getvalue()


def test_the_report_counts_runs_prices_usage_and_names_stalled_and_slow_runs(settings: Any) -> None:
    settings.PAI = {**settings.PAI, "MODEL_PRICES": {"gpt-x": {"input": 1, "output": 10}}}
    fast = _run("user:a", "completed", 1)
    slow = _run("user:b", "failed", 120, agent="helper")
    stalled = _run("user:a", "running", 5)
    Run.objects.filter(id=stalled.id).update(
        lease_owner="w1", lease_expires_at=timezone.now() - timedelta(minutes=5)
    )

    report = json.loads(_stats("--json", "--by", "agent,scope"))
    assert report["runsByStatus"] == {"completed": 1, "failed": 1, "running": 1}
    by_agent = {row["key"]: row for row in report["usage"]["agent"]}
    assert by_agent["demo"]["steps"] == 2 and by_agent["demo"]["inputTokens"] == 200
    assert by_agent["demo"]["cost"] == "0.0004"  # 200 in at 1 + 20 out at 10, per million
    assert {row["key"] for row in report["usage"]["scope"]} == {"user:a", "user:b"}
    assert report["stuckRuns"] == [stalled.id]
    assert [r["id"] for r in report["slowRuns"]] == [slow.id]
    assert fast.id not in report["slowRuns"]

    text = _stats("--by", "day")
    assert "runs: completed 1, failed 1, running 1" in text
    assert "usage by day:" in text and "cost 0.0006" in text
    assert stalled.id in text and slow.id in text


def test_bad_arguments_are_command_errors() -> None:
    with pytest.raises(CommandError, match="unknown grouping"):
        _stats("--by", "planet")
    with pytest.raises(CommandError, match="positive"):
        _stats("--days", "0")
