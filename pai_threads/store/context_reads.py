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

__all__ = ["context_json_sql", "context_messages", "messages_of_context_json"]

_CONTEXT_FIELDS = model_fields(Message, ("message_id", "role", "parts"))
_POSITION_FIELDS = model_fields(Message, ("id",))


@cache
def _context_select(
    vendor: str, windowed: bool, bound: str = "%s", positioned: bool = False
) -> str:
    """The window's SELECT; ``bound``: the thread id (a parameter, or a column of an
    enclosing statement); ``positioned``: the row's id is selected too (first)."""
    table = qn(Message._meta.db_table)
    fields = (*_POSITION_FIELDS, *_CONTEXT_FIELDS) if positioned else _CONTEXT_FIELDS
    names = ", ".join(f"{table}.{qn(str(f.column))}" for f in fields)
    thread, position = f"{table}.{qn('thread_id')}", f"{table}.{qn('id')}"
    direction = "DESC" if windowed else "ASC"
    if vendor == "postgresql":
        # The thread as a range, ordered by (thread, id): planned on the thread's index
        # however old the thread is (models.conditions.in_thread_order says why).
        where, order = f"{thread} >= {bound} AND {thread} <= {bound}", f"{thread} {direction}, "
    else:
        where, order = f"{thread} = {bound}", ""
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


@cache
def _context_json(vendor: str, thread_column: str, windowed: bool) -> str:
    window = _context_select(vendor, windowed, thread_column, positioned=True)
    columns = ", ".join(f"pai_window.{qn(str(f.column))}" for f in _CONTEXT_FIELDS)
    return (
        f"(SELECT COALESCE(json_agg(json_build_array({columns}) "  # noqa: S608
        f"ORDER BY pai_window.{qn('id')}), '[]'::json) FROM ({window}) pai_window)"
    )


def context_json_sql(thread_column: str, window: int | None) -> tuple[str, list[Any]]:
    """PostgreSQL: :func:`context_messages` of the thread in ``thread_column`` (a qualified
    column of the enclosing statement) as one scalar subquery, a JSON array of
    ``[id, role, parts]`` oldest first, so a statement about the run (the claim) returns the
    context too (:func:`messages_of_context_json` reads it): one round trip fewer. The same
    rows in the same order as :func:`context_messages`, walking the same index."""
    params: list[Any] = [Message.Status.COMMITTED.value]
    if window:
        params.append(window)
    return _context_json(connection.vendor, thread_column, bool(window)), params


def messages_of_context_json(value: Any) -> list[UIMessage]:
    """The messages of a :func:`context_json_sql` value (JSON text or decoded)."""
    items = json.loads(value) if isinstance(value, str | bytes) else value
    return [UIMessage(id=message_id, role=role, parts=parts) for message_id, role, parts in items]
