"""Operator functions behind the management commands: each command is a thin wrapper."""

from __future__ import annotations

from pai_threads.operations.checkup import AgentCheckup, check_agents, check_prices, ping_model
from pai_threads.operations.portability import (
    ExportFormatError,
    ImportConflict,
    PortabilityError,
    export_threads,
    import_threads,
)
from pai_threads.operations.purge import (
    PurgedFile,
    PurgedThread,
    PurgeError,
    PurgeReport,
    purge,
)
from pai_threads.operations.stats import RuntimeStats, SlowRun, collect_stats

__all__ = [
    "AgentCheckup",
    "ExportFormatError",
    "ImportConflict",
    "PortabilityError",
    "PurgeError",
    "PurgeReport",
    "PurgedFile",
    "PurgedThread",
    "RuntimeStats",
    "SlowRun",
    "check_agents",
    "check_prices",
    "collect_stats",
    "export_threads",
    "import_threads",
    "ping_model",
    "purge",
]
