"""What a reference run did to its database, measured from outside the framework.

The counterpart of :mod:`benchmarks.database` for the reference virtualenvs (no Django there):

* PostgreSQL, on a connection of its own: ``statements`` = pg_stat_statements ``calls`` of the
  database (reset at start, the probe's own excluded; an explicit BEGIN/COMMIT counts, as for
  PAI); ``commits`` = write transactions, i.e. transaction ids assigned
  (``pg_snapshot_xmax(pg_current_snapshot())`` before/after: every writing transaction gets
  one, read-only ones do not, which is what PAI's "commits" count too); ``bytes_written`` =
  WAL, the insert-LSN difference (exact even with ``synchronous_commit = off``).
* SQLite: ``bytes_written`` = bytes this process wrote (``wchar`` of /proc/self/io, i.e. WAL
  frames), as PAI's SQLite probe measures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

__all__ = ["PgProbe", "Probe", "SqliteIoProbe", "make_probe"]

PROBE_SQL = (
    "pg_stat_statements",
    "pg_current_wal",
    "pg_wal_lsn_diff",
    "pg_current_snapshot",
    "pg_database",
)


class Probe(Protocol):
    def start(self) -> None: ...

    def stop(self) -> dict[str, float]: ...

    def quiet_autovacuum(self, tables: tuple[str, ...]) -> None: ...

    def close(self) -> None: ...


class PgProbe:
    def __init__(self, url: str) -> None:
        import psycopg

        conn: Any = psycopg.connect(url, autocommit=True)
        self.conn = conn
        self.dbid = conn.execute(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        ).fetchone()[0]
        self.lsn0 = ""
        self.xid0 = 0

    def _xmax(self) -> int:
        row = self.conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
        return int(row.fetchone()[0])

    def start(self) -> None:
        self.conn.execute("SELECT pg_stat_statements_reset()")
        self.lsn0 = self.conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
        self.xid0 = self._xmax()

    def stop(self) -> dict[str, float]:
        commits = self._xmax() - self.xid0
        wal = self.conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s::pg_lsn)::bigint", [self.lsn0]
        ).fetchone()[0]
        statements = sum(
            int(calls)
            for query, calls in self.conn.execute(
                "SELECT query, calls FROM pg_stat_statements WHERE dbid = %s", [self.dbid]
            )
            if not any(p in query for p in PROBE_SQL)
        )
        return {"statements": statements, "commits": commits, "bytes_written": int(wal)}

    def quiet_autovacuum(self, tables: tuple[str, ...]) -> None:
        """Autovacuum off on the framework's tables, so WAL counts are the framework's alone."""
        for table in tables:
            self.conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")

    def close(self) -> None:
        self.conn.close()


class SqliteIoProbe:
    @staticmethod
    def _wchar() -> int:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
        return 0

    def __init__(self) -> None:
        self.w0 = 0

    def start(self) -> None:
        self.w0 = self._wchar()

    def stop(self) -> dict[str, float]:
        return {"bytes_written": self._wchar() - self.w0}

    def quiet_autovacuum(self, tables: tuple[str, ...]) -> None:
        return None

    def close(self) -> None:
        return None


def make_probe(db: str, url: str) -> Probe:
    return PgProbe(url) if db == "postgresql" else SqliteIoProbe()
