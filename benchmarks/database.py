"""The benchmark database: creating it, and measuring what a phase did to it.

A *probe* brackets a phase (``start`` … ``stop``) and reports what the database saw, from
outside Django so that the runtime's own connections are not disturbed:

* PostgreSQL: pg_stat_statements (reset at start; every statement of the benchmark database
  with its ``calls``, BEGIN and COMMIT included) and WAL bytes (the insert LSN difference:
  exact even with ``synchronous_commit = off``, where the flushed LSN lags).
* SQLite: bytes the process wrote (``wchar`` of /proc/self/io: WAL frames, as SQLite writes
  whole pages per commit) and the database file's net growth (after a TRUNCATE checkpoint).
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "BENCH_DB_NAME",
    "DbStats",
    "PostgresProbe",
    "Probe",
    "SqliteProbe",
    "create_postgres_database",
]

BENCH_DB_NAME = "pai_bench"

# The probe's own statements, which must not count against the runtime.
_PROBE_SQL = re.compile(
    r"pg_stat_statements|pg_current_wal|pg_wal_lsn_diff|pg_get_wal_stats|pg_logical_emit",
    re.IGNORECASE,
)

# PostgreSQL's foreign-key triggers run these per inserted/updated referencing row; they fire
# after the statement's executor ends, so pg_stat_statements records them as top-level.
FK_CHECK_SQL = re.compile(r"^SELECT 1 FROM ONLY .* FOR KEY SHARE OF x$", re.IGNORECASE)

# Tables whose autovacuum would add WAL in the middle of a measured phase.
BENCH_TABLES = ("pai_threads_thread", "pai_threads_run", "pai_threads_message", "pai_threads_step")


@dataclass
class DbStats:
    """What the database saw during one phase."""

    bytes_written: int
    statements: int | None = None  # pg_stat_statements calls (None on SQLite)
    fk_checks: int = 0  # of which foreign-key trigger queries (PostgreSQL)
    by_query: dict[str, int] = field(default_factory=dict)
    file_growth: int | None = None  # SQLite only: net growth of the database file
    wal_by_kind: dict[str, int] = field(default_factory=dict)  # pg_walinspect, if available


class Probe(Protocol):
    def start(self) -> None: ...

    def stop(self) -> DbStats: ...

    def close(self) -> None: ...


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def create_postgres_database(server_url: str, name: str = BENCH_DB_NAME) -> str:
    """(Re)create database ``name`` on the server of ``server_url``; return its URL."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = _with_database(server_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return url


def quiet_autovacuum(url: str) -> None:
    """Turn autovacuum off on the runtime's tables so WAL counts are the runtime's alone."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for table in BENCH_TABLES:
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")


class PostgresProbe:
    """pg_stat_statements and WAL position, read on a connection of its own."""

    def __init__(self, url: str) -> None:
        import psycopg

        self._conn = psycopg.connect(url, autocommit=True)
        row = self._conn.execute(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        ).fetchone()
        assert row is not None
        self._dbid = row[0]
        self._lsn: str | None = None
        self._walinspect = self._enable_walinspect()

    def _enable_walinspect(self) -> bool:
        """pg_walinspect (PostgreSQL 15+) splits WAL bytes by kind: heap, index, commit."""
        import psycopg

        try:
            self._conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        except psycopg.Error:
            return False
        self._conn.execute("SET synchronous_commit = on")
        return True

    def _wal_by_kind(self, end_lsn: str) -> dict[str, int]:
        if not self._walinspect:
            return {}
        import psycopg

        # A transaction that writes WAL commits synchronously (synchronous_commit is on for
        # this connection), flushing every record before it: the phase's become readable.
        with self._conn.transaction():
            self._conn.execute("SELECT pg_logical_emit_message(true, 'pai-bench', '')")
        try:
            rows = self._conn.execute(
                'SELECT "resource_manager/record_type", combined_size '
                "FROM pg_get_wal_stats(%s::pg_lsn, %s::pg_lsn, false) WHERE count > 0",
                [self._lsn, end_lsn],
            ).fetchall()
        except psycopg.Error:
            return {}
        return {str(kind): int(size) for kind, size in rows}

    def server_version(self) -> str:
        row = self._conn.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else "?"

    def settings(self) -> dict[str, str]:
        """The server's configuration (``reset_val``: not this probe session's overrides)."""
        names = ("synchronous_commit", "fsync", "full_page_writes", "shared_buffers")
        rows = self._conn.execute(
            "SELECT name, reset_val FROM pg_settings WHERE name = ANY(%s)", [list(names)]
        ).fetchall()
        return {name: value for name, value in rows}

    def start(self) -> None:
        self._conn.execute("SELECT pg_stat_statements_reset()")
        row = self._conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
        assert row is not None
        self._lsn = row[0]

    def stop(self) -> DbStats:
        row = self._conn.execute(
            "SELECT pg_current_wal_insert_lsn()::text, "
            "pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s::pg_lsn)::bigint",
            [self._lsn],
        ).fetchone()
        assert row is not None
        end_lsn, wal = row[0], int(row[1])
        rows = self._conn.execute(
            "SELECT query, calls FROM pg_stat_statements WHERE dbid = %s", [self._dbid]
        ).fetchall()
        by_query: dict[str, int] = {}
        for query, calls in rows:
            if _PROBE_SQL.search(query):
                continue
            key = " ".join(query.split())
            by_query[key] = by_query.get(key, 0) + int(calls)
        fk_checks = sum(calls for query, calls in by_query.items() if FK_CHECK_SQL.match(query))
        # Only now: its flushing commit must not appear in the statements read above.
        wal_by_kind = self._wal_by_kind(end_lsn)
        return DbStats(
            bytes_written=wal,
            statements=sum(by_query.values()),
            fk_checks=fk_checks,
            by_query=by_query,
            wal_by_kind=wal_by_kind,
        )

    def close(self) -> None:
        self._conn.close()


def _process_wchar() -> int:
    """Bytes this process passed to write() (all threads): SQLite's WAL frame writes."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise RuntimeError("/proc/self/io has no wchar")


class SqliteProbe:
    """Bytes written by this process and the database file's growth."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._wchar = 0
        self._size = 0

    def _checkpoint(self) -> None:
        conn = sqlite3.connect(self._path, timeout=20)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()

    def _db_size(self) -> int:
        return os.path.getsize(self._path)

    def start(self) -> None:
        self._checkpoint()
        self._size = self._db_size()
        self._wchar = _process_wchar()

    def stop(self) -> DbStats:
        written = _process_wchar() - self._wchar
        self._checkpoint()
        return DbStats(bytes_written=written, file_growth=self._db_size() - self._size)

    def close(self) -> None:
        pass
