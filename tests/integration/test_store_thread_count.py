"""How many store threads a process runs (``PAI["STORE_THREADS"]``, pai_threads.store.db).

Unset, SQLite gets one: its writers take turns anyway, and a second writer thread only
waits in SQLite's busy handler, whose sleeps (1, 2, 5, 10 ... ms) outlast the lock they wait
for (benchmark W3 on SQLite: 125-138 -> 147-182 runs/s). PostgreSQL gets four.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from pai_threads.store.db import SERVER_DATABASE_STORE_THREADS, store_thread_count


def test_unset_picks_by_database(settings: Any) -> None:
    settings.PAI = {k: v for k, v in settings.PAI.items() if k != "STORE_THREADS"}
    expected = 1 if connection.vendor == "sqlite" else SERVER_DATABASE_STORE_THREADS
    assert store_thread_count() == expected


@pytest.mark.parametrize("count", [1, 3, 8])
def test_a_configured_count_is_used_on_any_database(settings: Any, count: int) -> None:
    settings.PAI = {**settings.PAI, "STORE_THREADS": count}
    assert store_thread_count() == count
