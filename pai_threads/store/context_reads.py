"""The thread's context window: the one read every run episode starts with.

Built once per database like the store's other statements (:mod:`.sql`); on PostgreSQL the
thread is written as a range ordered by ``(thread_id, id)`` so the planner walks the
thread's own index however old the thread is (``models.conditions.in_thread_order``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db import connection

from pai_threads.models import Message
from pai_threads.store.prepared import prepared_cursor
from pai_threads.store.sql import ReturnedRow, convert, model_fields, qn

__all__ = ["context_rows"]

_CONTEXT_FIELDS = model_fields(Message, ("message_id", "role", "parts"))


@cache
def _context_select(vendor: str, windowed: bool) -> str:
    table = qn(Message._meta.db_table)
    names = ", ".join(f"{table}.{qn(str(f.column))}" for f in _CONTEXT_FIELDS)
    thread, position = f"{table}.{qn('thread_id')}", f"{table}.{qn('id')}"
    direction = "DESC" if windowed else "ASC"
    if vendor == "postgresql":
        # The thread as a range, ordered by (thread, id): planned on the thread's index
        # however old the thread is (models.conditions.in_thread_order says why).
        where, order = f"{thread} >= %s AND {thread} <= %s", f"{thread} {direction}, "
    else:
        where, order = f"{thread} = %s", ""
    sql = (
        f"SELECT {names} FROM {table} WHERE ({table}.{qn('in_context')} "  # noqa: S608
        f"AND {table}.{qn('status')} = %s AND {where}) "
        f"ORDER BY {order}{position} {direction}"
    )
    return sql + " LIMIT %s" if windowed else sql


def context_rows(thread_id: str, window: int | None) -> list[ReturnedRow]:
    """A thread's context-visible committed messages (message_id, role, parts), oldest
    first: the newest ``window`` of them, or all with None."""
    params: list[Any] = [Message.Status.COMMITTED.value, thread_id]
    if connection.vendor == "postgresql":
        params.append(thread_id)  # the range's upper bound
    if window:
        params.append(window)
    with prepared_cursor() as cursor:
        cursor.execute(_context_select(connection.vendor, bool(window)), params)
        raw = cursor.fetchall()
    if window:
        raw.reverse()
    return [convert(_CONTEXT_FIELDS, values) for values in raw]
