"""The repeated checkpoint of an open message: one prebuilt, self-fencing statement.

While the model streams, the open assistant message is rewritten every couple of seconds
(docs/durability.md). After the first checkpoint of a step inserted the row, each later one
is a single ``UPDATE`` that checks three things in its ``WHERE``: the row is still the
step's open message, it is still the thread's tail (MF-043: no message after it), and the
lease still holds (a locking ``EXISTS`` on the run row, as every fenced write). It returns
only whether input is queued, the one fact the caller reads: not the parts it just wrote.

The first checkpoint of a step is one prebuilt ``INSERT ... SELECT`` too, fenced the same
way, and inserting only while the thread has no open message: a step that resumes a crashed
execution's open row, a lost lease or another open message inserts nothing, and the store's
ORM path tells which.

Their text is built once per database vendor: building it through the ORM cost more than
running it (the ``~Exists`` tail check alone ~0.6 ms of CPU per checkpoint on SQLite, with
200 live streams a quarter of the server's samples; the ORM's first checkpoint, fence,
UPDATE and ``create``, a fifth at 400; docs/benchmarks.md). On PostgreSQL the run loop sends
either statement on its own connection (:mod:`~pai_threads.store.loop_connections`); the
ORM's slow path (:func:`checkpoint_by_orm`) runs on a store thread.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from pai_agents.engine.store import Lease, OpenMessageConflict
from pai_agents.messages.types import UIMessage
from pai_threads.models import Message
from pai_threads.store.fenced_writes import output_message, stored_parts
from pai_threads.store.inserts import insert_sql
from pai_threads.store.prepared import prepared_cursor
from pai_threads.store.sql import fence, held_exists_sql, model_fields, qn, queued_sql

__all__ = [
    "checkpoint_by_orm",
    "checkpoint_parts",
    "checkpoint_statement",
    "checkpoint_sync",
    "checkpointed",
    "open_conflicts",
]

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


def _update_statement(lease: Lease, step_index: int, parts: Any) -> tuple[str, list[Any]]:
    """Rewrite the parts of the step's open message, still the thread's tail, under
    ``lease`` (returning whether input is queued; no row when nothing matched: the row is
    gone, no longer open or not the tail, or the lease is lost)."""
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
    return _checkpoint_update(conn.vendor, held, queued), params


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


def _insert_statement(lease: Lease, row: Message) -> tuple[str, list[Any]]:
    """Insert ``row`` (an open step message) under ``lease`` while its thread has no open
    message (returning whether input is queued; no row when nothing was inserted: the lease
    is lost, or an open message exists)."""
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
    return f"{insert} RETURNING {queued}", params


def checkpoint_parts(message: UIMessage) -> Any:
    """The open message's parts as stored; only an assistant message can be open (MF-043)."""
    parts = stored_parts(message)
    if message["role"] != "assistant":
        raise OpenMessageConflict("only an assistant message can be open (MF-043)")
    return parts


def checkpoint_statement(
    lease: Lease, message: UIMessage, step_index: int, parts: Any, *, opened: bool
) -> tuple[str, list[Any]]:
    """The checkpoint's one statement: the UPDATE of the row this execution ``opened``,
    else the step's first checkpoint, the INSERT. Its row goes to :func:`checkpointed`."""
    if opened:
        return _update_statement(lease, step_index, parts)
    row = Message(**output_message(lease, message, step_index, parts=parts))
    row.status = Message.Status.OPEN
    return _insert_statement(lease, row)


def checkpointed(row: Sequence[Any] | None) -> bool | None:
    """Whether input is queued, from the statement's row; None: it wrote nothing (then
    :func:`checkpoint_by_orm` tells why, and writes)."""
    return None if row is None else bool(row[0])


def checkpoint_sync(
    lease: Lease, message: UIMessage, step_index: int, parts: Any, *, opened: bool
) -> bool | None:
    """:func:`checkpoint_statement` sent on this thread's connection."""
    sql, params = checkpoint_statement(lease, message, step_index, parts, opened=opened)
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return checkpointed(cursor.fetchone())


def checkpoint_by_orm(lease: Lease, message: UIMessage, step_index: int, parts: Any) -> None:
    """The slow path, when the statement wrote nothing: a step resuming a crashed
    execution's open row updates it; a lost lease raises LeaseLost; another open message
    (or one after it) is refused by the one-open-message index (IntegrityError)."""
    later = Message.objects.filter(thread_id=lease.thread_id, pk__gt=OuterRef("pk"))
    rows = Message.objects.filter(
        run_id=lease.run_id, step_index=step_index, status=Message.Status.OPEN
    ).filter(~Exists(later))
    with transaction.atomic():
        fence(lease)
        if not rows.update(parts=parts, updated_at=timezone.now()):
            Message.objects.create(
                **output_message(lease, message, step_index, parts=parts),
                status=Message.Status.OPEN,
            )


@contextmanager
def open_conflicts(message: UIMessage) -> Iterator[None]:
    """The one-open-message index's refusal as the engine's :class:`OpenMessageConflict`."""
    try:
        yield
    except IntegrityError as exc:
        raise OpenMessageConflict(
            f"message {message['id']} cannot be open: another message of the thread is "
            "open, or it is not the thread's tail (MF-043)"
        ) from exc
