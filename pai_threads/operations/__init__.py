"""Operator functions behind the management commands: each command is a thin wrapper."""

from __future__ import annotations

from pai_threads.operations.stats import RuntimeStats, SlowRun, collect_stats

__all__ = ["RuntimeStats", "SlowRun", "collect_stats"]
