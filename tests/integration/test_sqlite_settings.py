"""The demo's SQLite connection: WAL with synchronous=NORMAL (docs/operations.md, Databases).

WAL lets runs write while requests read; NORMAL drops the fsync per commit, which a run
pays 4-5 times (issue 16), while a killed process still loses no commit.
"""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_the_demo_sqlite_connection_is_wal_without_an_fsync_per_commit() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("a SQLite setting")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        (journal,) = cursor.fetchone()
        cursor.execute("PRAGMA synchronous")
        (synchronous,) = cursor.fetchone()
    assert journal == "wal"
    assert synchronous == 1  # NORMAL (FULL is 2)
