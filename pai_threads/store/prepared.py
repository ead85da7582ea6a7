"""Cursors for the hot path's prebuilt statements: prepared once per connection on PostgreSQL.

The statements a run sends (the send, the claim, the step writes, the context read, the
heartbeat) are a few fixed texts built once per process (:mod:`pai_threads.store.sql`). With
Django's default cursor (client-side binding) PostgreSQL parsed and planned each of them on
every execution: planning alone took 0.15-0.45 ms per statement, more than executing it
(1.3 ms of a W1 run's 10 statements, pg_stat_statements with ``track_planning``). Through
:func:`prepared_cursor` each is sent with server-side binding and prepared on its first
execution on a connection (psycopg's ``prepare``), so the server plans it a few times per
connection, then reuses the plan. The store threads keep their connections, so that is once
per process.

Django leaves psycopg's ``prepare_threshold`` at None (no prepared statements, for
connection poolers): only these statements are prepared, the ORM's queries stay as they
were. Behind a pooler in transaction mode that cannot carry prepared statements (PgBouncer
older than 1.21), set ``PAI["PREPARED_STATEMENTS"] = False``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db import connection
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

from pai_threads.conf import pai_settings

__all__ = ["PREPARE_ONLY_WHEN_ASKED", "prepared_cursor"]

#: A connection whose threshold is None never prepares, even when asked; a threshold this
#: high makes psycopg prepare only what is asked for.
PREPARE_ONLY_WHEN_ASKED = 2**31 - 1


@cache
def _preparing_cursor_class() -> type[Any]:
    """A psycopg cursor with server-side binding (Django's ``ServerBindingCursor`` adds only
    ``callproc``) that prepares every statement it executes; built on first use (psycopg is
    imported only on PostgreSQL)."""
    import psycopg

    class PreparingCursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            kwargs.setdefault("prepare", True)
            return super().execute(query, params, **kwargs)

    return PreparingCursor


class _DebugWrapper(CursorDebugWrapper):
    """Logs each statement with its parameters in it, as Django does with server-side
    binding (its own lookup of the last query finds none on a prepared execution)."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        with self.debug_sql(self.db.ops.compose_sql(sql, params), params):
            return CursorWrapper.execute(self, sql, params)


def prepared_cursor() -> CursorWrapper:
    """A cursor of the default connection for one of the hot path's prebuilt statements
    (use it as ``connection.cursor()``): on PostgreSQL it prepares the statement; elsewhere,
    or with ``PAI["PREPARED_STATEMENTS"]`` off, it is ``connection.cursor()``."""
    if connection.vendor != "postgresql" or not pai_settings.PREPARED_STATEMENTS:
        return connection.cursor()
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:
        raw.prepare_threshold = PREPARE_ONLY_WHEN_ASKED
    cursor = _preparing_cursor_class()(raw)
    connection.validate_thread_sharing()
    if connection.queries_logged:  # DEBUG, or a test capturing queries
        return _DebugWrapper(cursor, connection)
    return connection.make_cursor(cursor)
