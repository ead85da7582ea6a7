"""Inserting a new row and touching a thread, without the ORM's per-statement overhead;
folding chunks into a stored message outside a run.

``Model.objects.create()`` compiles its INSERT afresh each time; the send path and the
admission of queued input write a run and its input message per send, so they use the
statements of :mod:`pai_threads.store.sql`, built once (same text, same prepared values).
Like the store's other writes they send no ``pre_save``/``post_save`` signals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Model
from django.utils import timezone

from pai_agents.messages.reducer import MessageReducer
from pai_threads.models import Message, Run, Thread
from pai_threads.store.inserts import insert_sql
from pai_threads.store.prepared import prepared_cursor
from pai_threads.store.sql import convert, model_fields, qn

__all__ = [
    "active_run",
    "active_run_exists",
    "fold_chunks",
    "insert_row",
    "mark_stored",
    "scoped_thread",
    "touch_thread",
]

M = TypeVar("M", bound=Model)


def insert_row(obj: M) -> M:
    """INSERT ``obj`` as ``obj.save(force_insert=True)`` would (``auto_now`` values and a
    generated key filled in); returns ``obj``, marked as stored."""
    meta = obj._meta
    auto = meta.auto_field
    returning = model_fields(type(obj), (auto.attname,)) if auto is not None else ()
    sql, params = insert_sql(obj, returning=returning)
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        if auto is not None:
            setattr(obj, auto.attname, cursor.fetchone()[0])
    return mark_stored(obj)


def mark_stored(obj: M, using: str = DEFAULT_DB_ALIAS) -> M:
    """Mark ``obj`` as loaded from ``using``, as ``save()`` leaves it: a later ``save()``
    updates the row instead of inserting it again. For rows written without the ORM."""
    obj._state.adding = False
    obj._state.db = using
    return obj


_UPDATED_AT = model_fields(Thread, ("updated_at",))[0]


@cache
def _touch(vendor: str) -> str:
    table = qn(Thread._meta.db_table)
    return f"UPDATE {table} SET {qn('updated_at')} = %s WHERE {table}.{qn('id')} = %s"  # noqa: S608


def touch_thread(thread_id: str) -> bool:
    """``updated_at = now`` on the thread (taking its row lock until commit); False when the
    thread is gone."""
    now = _UPDATED_AT.get_db_prep_save(timezone.now(), connection)
    with prepared_cursor() as cursor:
        cursor.execute(_touch(connection.vendor), [now, thread_id])
        return cursor.rowcount == 1


@cache
def _thread_select(vendor: str) -> tuple[str, tuple[Any, ...]]:
    fields = tuple(Thread._meta.concrete_fields)
    table = qn(Thread._meta.db_table)
    names = ", ".join(f"{table}.{qn(str(f.column))}" for f in fields)
    sql = f"SELECT {names} FROM {table} WHERE {table}.{qn('id')} = %s"  # noqa: S608
    return sql, fields


def scoped_thread(thread_id: str, scope_key: str) -> Thread | None:
    """``Thread.objects.get(id=..., scope_key=...)`` (None when absent or another scope's),
    its SELECT built once: every send and every thread request starts with it.

    The statement names the primary key alone and the scope is compared here: with both in
    the WHERE clause, PostgreSQL's generic plan for the prepared statement may walk
    ``pai_thread_scope_archived`` (scope_key, ..., id) instead, reading every entry of the
    scope, a cost that grows with the threads one scope holds."""
    sql, fields = _thread_select(connection.vendor)
    with prepared_cursor() as cursor:
        cursor.execute(sql, [thread_id])
        row = cursor.fetchone()
    if row is None:
        return None
    values = convert(fields, row)
    if values["scope_key"] != scope_key:
        return None
    return Thread.from_db(DEFAULT_DB_ALIAS, list(values), list(values.values()))


# Stands for the thread id in the compiled statement below (a value no thread id takes).
_THREAD = "\x00thread"


@cache
def _active_select(vendor: str) -> tuple[str, tuple[Any, ...]]:
    """``Run.objects.active()``'s statement for one thread, compiled once by the ORM: the
    condition must read as pai_one_active_run_per_thread's does for SQLite to use it, and
    Django writes both differently by version ("active" on 5.2, "active" = 1 / = %s on 6)."""
    rows = Run.objects.active().filter(thread_id=_THREAD).order_by("created_at")
    return rows.values_list("id", "status")[:1].query.sql_with_params()


def active_run(thread_id: str) -> Run | None:
    """The thread's active run (id and status loaded, the rest deferred), or None: what
    ``Run.objects.active().filter(thread=...).only("id", "status").first()`` returns."""
    sql, params = _active_select(connection.vendor)
    with prepared_cursor() as cursor:
        cursor.execute(sql, [thread_id if p == _THREAD else p for p in params])
        row = cursor.fetchone()
    return None if row is None else Run.from_db(DEFAULT_DB_ALIAS, ["id", "status"], list(row))


def active_run_exists(thread_id: str) -> tuple[str, list[Any]]:
    """``EXISTS`` the thread's active run, as :func:`active_run` reads it (the active-run
    index's condition, as this Django version writes it), for statements that embed it."""
    sql, params = _active_select(connection.vendor)
    return f"EXISTS ({sql})", [thread_id if p == _THREAD else p for p in params]


def fold_chunks(row: Message, chunks: Iterable[Mapping[str, Any]]) -> list[Any]:
    """Apply stream ``chunks`` to the stored assistant message ``row`` as the engine would
    (the one reducer), write its parts, and return them (``row`` is updated too).

    For writes made outside a run, inside the caller's transaction: an approval's or a
    client tool's answer, the cancel results of a waiting run, a sub-agent's progress."""
    reducer = MessageReducer({"id": row.message_id, "role": "assistant", "parts": row.parts})
    for chunk in chunks:
        reducer.apply(dict(chunk))
    row.parts = reducer.message["parts"]
    row.updated_at = timezone.now()
    Message.objects.filter(pk=row.pk).update(parts=row.parts, updated_at=row.updated_at)
    return list(row.parts)
