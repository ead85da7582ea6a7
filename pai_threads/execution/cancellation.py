"""Abort signals of the runs executing in this process, for an immediate cancel.

``cancel_run`` marks the run in the database (every executor sees that at its next
heartbeat) and, after commit, aborts the local signal when the run executes here, so the
embedded executor cancels at once. Other processes rely on the heartbeat.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pai_agents.abort import AbortSignal

__all__ = ["abort_local", "registered"]

_lock = threading.Lock()
_signals: dict[str, AbortSignal] = {}


@contextmanager
def registered(run_id: str, signal: AbortSignal) -> Iterator[AbortSignal]:
    with _lock:
        _signals[run_id] = signal
    try:
        yield signal
    finally:
        with _lock:
            if _signals.get(run_id) is signal:
                del _signals[run_id]


def abort_local(run_id: str, reason: str = "cancelled") -> bool:
    with _lock:
        signal = _signals.get(run_id)
    if signal is None:
        return False
    signal.abort(reason)
    return True
