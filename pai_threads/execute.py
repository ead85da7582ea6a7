"""Compatibility path (named in the docs and in settings).

The code is in :mod:`pai_threads.execution.execute`.
"""

from pai_threads.execution.execute import aexecute_run, worker_name

__all__ = ["aexecute_run", "worker_name"]
