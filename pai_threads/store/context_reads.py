"""The thread's context window: the one read every run episode starts with.

Built once per database like the store's other statements (:mod:`.sql`); on PostgreSQL the
thread is written as a range ordered by ``(thread_id, id)`` so the planner walks the
thread's own index however old the thread is (``models.conditions.in_thread_order``).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from django.db import connection

from pai_agents.messages.types import UIMessage
from pai_threads.models import Message
from pai_threads.store.prepared import prepared_cursor
from pai_threads.store.sql import model_fields, qn

__all__ = ["context_messages"]

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


def context_messages(thread_id: str, window: int | None) -> list[UIMessage]:
    """A thread's context-visible committed messages, oldest first: the newest ``window``
    of them, or all with None. Built straight from the raw rows, the one JSON column
    decoded, without the ORM's per-field converters: every run reads up to the whole
    window, so per-message cost is what longer threads pay (W2)."""
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
    loads = json.loads
    return [
        UIMessage(
            id=message_id,
            role=role,
            parts=loads(parts) if isinstance(parts, str | bytes) else parts,
        )
        for message_id, role, parts in raw
    ]
