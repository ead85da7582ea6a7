"""How many store threads a process runs (``PAI["STORE_THREADS"]``, store.thread_counts).

Unset, SQLite gets one: its writers take turns anyway, and a second writer thread only
waits in SQLite's busy handler, whose sleeps (1, 2, 5, 10 ... ms) outlast the lock they wait
for (benchmark W3 on SQLite: 125-138 -> 147-182 runs/s). PostgreSQL gets one per usable CPU,
2 to 4: beyond the CPUs a store thread mostly waits for the GIL.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.db import connection

from pai_threads.store import thread_counts
from pai_threads.store.thread_counts import store_thread_count, usable_cpu_count


@pytest.mark.parametrize(("cpus", "server_default"), [(1, 2), (2, 2), (3, 3), (4, 4), (16, 4)])
def test_unset_picks_by_database_and_cpus(
    settings: Any, monkeypatch: pytest.MonkeyPatch, cpus: int, server_default: int
) -> None:
    settings.PAI = {k: v for k, v in settings.PAI.items() if k != "STORE_THREADS"}
    monkeypatch.setattr(thread_counts, "usable_cpu_count", lambda: cpus)
    expected = 1 if connection.vendor == "sqlite" else server_default
    assert store_thread_count() == expected


@pytest.mark.parametrize("count", [1, 3, 8])
def test_a_configured_count_is_used_on_any_database(
    settings: Any, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    settings.PAI = {**settings.PAI, "STORE_THREADS": count}
    monkeypatch.setattr(thread_counts, "usable_cpu_count", lambda: 2)
    assert store_thread_count() == count


def test_usable_cpus_follow_the_affinity_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    """A container's CPU set, not the machine's count (what the process may run on); the
    machine's count where the platform has no affinity mask."""
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 5}, raising=False)
    assert usable_cpu_count() == 2
    monkeypatch.delattr(os, "sched_getaffinity")
    assert usable_cpu_count() == 64
