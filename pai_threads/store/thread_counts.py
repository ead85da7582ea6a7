"""How many store threads a process runs (and, by default, how many connections each run
loop keeps: :mod:`~pai_threads.store.loop_connections`)."""

from __future__ import annotations

import os

from django.db import DEFAULT_DB_ALIAS, connections

from pai_threads.conf import pai_settings

__all__ = [
    "MIN_SERVER_DATABASE_STORE_THREADS",
    "SERVER_DATABASE_STORE_THREADS",
    "store_thread_count",
    "usable_cpu_count",
]


#: ``PAI["STORE_THREADS"]`` when unset, on PostgreSQL: one per usable CPU, at least
#: :data:`MIN_SERVER_DATABASE_STORE_THREADS` and at most this many.
SERVER_DATABASE_STORE_THREADS = 4
MIN_SERVER_DATABASE_STORE_THREADS = 2


def usable_cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask, which containers narrow; the
    machine's count where the platform has no mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def store_thread_count() -> int:
    """``PAI["STORE_THREADS"]``, or its default for the database: 1 on SQLite, whose writers
    take turns anyway (a second writer waits in SQLite's busy handler, which sleeps 1, 2, 5,
    10 ... ms however soon the lock is free: W3's 50 concurrent runs went 125-138 -> 147-182
    runs/s with one thread). Elsewhere one per usable CPU, 2 to 4: the database answers in
    well under a millisecond, so a thread beyond the CPUs mostly waits for the GIL (on 2
    CPUs, W3 on PostgreSQL ran ~7% more runs per second with 2 threads than with 4, and W5's
    delivery p99 at 200 streams was lower); two keep one slow statement from holding up
    every other run."""
    configured = pai_settings.STORE_THREADS
    if configured is not None:
        return int(configured)
    if connections[DEFAULT_DB_ALIAS].vendor == "sqlite":
        return 1
    return max(
        MIN_SERVER_DATABASE_STORE_THREADS, min(SERVER_DATABASE_STORE_THREADS, usable_cpu_count())
    )
