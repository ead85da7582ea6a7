"""The repeated checkpoint of an open message: one prebuilt, self-fencing statement.

While the model streams, the open assistant message is rewritten every couple of seconds
(docs/durability.md). After the first checkpoint of a step inserted the row, each later one
is a single ``UPDATE`` that checks three things in its ``WHERE``: the row is still the
step's open message, it is still the thread's tail (MF-043: no message after it), and the
lease still holds (a locking ``EXISTS`` on the run row, as every fenced write). It returns
only whether input is queued, the one fact the caller reads: not the parts it just wrote.

The first checkpoint of a step (:func:`insert_open_message`) is one prebuilt ``INSERT ...
SELECT`` too, fenced the same way, and inserting only while the thread has no open message:
a step that resumes a crashed execution's open row, a lost lease or another open message
inserts nothing, and the store's ORM path tells which.

Their text is built once per database vendor: building it through the ORM cost more than
running it (the ``~Exists`` tail check alone ~0.6 ms of CPU per checkpoint on SQLite, with
200 live streams a quarter of the server's samples; the ORM's first checkpoint, fence,
UPDATE and ``create``, a fifth at 400; docs/benchmarks.md).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from pai_agents.engine.store import Lease
from pai_threads.models import Message
from pai_threads.store.inserts import insert_sql
from pai_threads.store.prepared import prepared_cursor
from pai_threads.store.sql import held_exists_sql, model_fields, qn, queued_sql

__all__ = ["checkpoint_open_parts", "insert_open_message"]

_FIELDS = model_fields(Message, ("parts", "updated_at"))


@cache
def _tail_column(vendor: str) -> str:
    return f"{qn(Message._meta.db_table)}.{qn('thread_id')}"


@cache
def _checkpoint_update(vendor: str, held: str, queued: str) -> str:
    """The statement's text: per vendor, with the (cached) fencing and queue clauses."""
    table = qn(Message._meta.db_table)

    def col(name: str) -> str:
        return f"{table}.{qn(name)}"

    return (
        f"UPDATE {table} SET {qn('parts')} = %s, {qn('updated_at')} = %s "  # noqa: S608
        f"WHERE ({col('run_id')} = %s AND {col('step_index')} = %s AND {col('status')} = %s "
        f"AND NOT EXISTS (SELECT 1 FROM {table} {qn('later')} WHERE "
        f"{qn('later')}.{qn('thread_id')} = %s AND {qn('later')}.{qn('id')} > {col('id')})) "
        f"AND {held} RETURNING {queued}"
    )


def checkpoint_open_parts(lease: Lease, *, step_index: int, parts: Any) -> bool | None:
    """Rewrite the parts of the step's open message, still the thread's tail, under
    ``lease``: whether input is queued, or None when nothing matched (the row is gone, no
    longer open or not the tail, or the lease is lost: the caller's slow path tells which)."""
    conn = connections[DEFAULT_DB_ALIAS]
    values = [
        field.get_db_prep_save(value, connection=conn)
        for field, value in zip(_FIELDS, (parts, timezone.now()), strict=True)
    ]
    held, held_params = held_exists_sql(lease)
    queued, queued_params = queued_sql(_tail_column(conn.vendor))
    params = [
        *values,
        lease.run_id,
        step_index,
        Message.Status.OPEN.value,
        lease.thread_id,
        *held_params,
        *queued_params,
    ]
    with prepared_cursor() as cursor:
        cursor.execute(_checkpoint_update(conn.vendor, held, queued), params)
        row = cursor.fetchone()
    return None if row is None else bool(row[0])


@cache
def _no_open_message(vendor: str, held: str) -> str:
    """The ``INSERT ... SELECT``'s source: one row while the lease holds and the thread has
    no open message (the one-open-message index answers the probe)."""
    table = qn(Message._meta.db_table)
    return (
        f"(SELECT 1 AS {qn('one')}) {qn('pai_one')} WHERE {held} AND NOT EXISTS "  # noqa: S608
        f"(SELECT 1 FROM {table} {qn('open')} WHERE {qn('open')}.{qn('thread_id')} = %s "
        f"AND {qn('open')}.{qn('status')} = %s)"
    )


def insert_open_message(lease: Lease, row: Message) -> bool | None:
    """Insert ``row`` (an open step message) under ``lease`` while its thread has no open
    message: whether input is queued, or None when nothing was inserted (the lease is lost,
    or an open message exists: the caller's ORM path updates or refuses it)."""
    conn = connections[DEFAULT_DB_ALIAS]
    held, held_params = held_exists_sql(lease)
    source = _no_open_message(conn.vendor, held)
    insert, insert_params = insert_sql(row, source=source)
    queued, queued_params = queued_sql(_tail_column(conn.vendor))
    params = [
        *insert_params,
        *held_params,
        lease.thread_id,
        Message.Status.OPEN.value,
        *queued_params,
    ]
    with prepared_cursor() as cursor:
        cursor.execute(f"{insert} RETURNING {queued}", params)
        found = cursor.fetchone()
    return None if found is None else bool(found[0])
