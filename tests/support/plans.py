"""Query plans of the statements a call sends, as sent (SQL and bound parameters).

On SQLite ``EXPLAIN QUERY PLAN``; on PostgreSQL ``EXPLAIN`` with sequential scans off, whose
planner rightly prefers them on test-sized tables: the plan then says whether an index path
exists at all.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

__all__ = ["query_plan", "sent_plan", "sent_statements"]


def sent_statements(call: Any) -> list[tuple[str, Any]]:
    """Every (SQL, parameters) ``call`` sends on the test thread's connection."""
    sent: list[tuple[str, Any]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        sent.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        call()
    return sent


def query_plan(sql: str, params: Any = ()) -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute(f"EXPLAIN {sql}", params)
            return "\n".join(str(row[0]) for row in cursor.fetchall())
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


def sent_plan(call: Any) -> str:
    """The plan of the one statement ``call`` sends."""
    [(sql, params)] = sent_statements(call)
    return query_plan(sql, params)
