"""Compatibility path (named in the docs and in settings).

The code is in :mod:`pai_threads.execution.recovery`.
"""

from pai_threads.execution.recovery import (
    Sweep,
    Sweeper,
    find_stalled_runs,
    recover_runs,
    waiting_dispatches,
)

__all__ = ["Sweep", "Sweeper", "find_stalled_runs", "recover_runs", "waiting_dispatches"]
