"""A send that starts a run in one statement (PostgreSQL, outside a transaction).

The usual send is a transaction of four statements: touch the thread (its row lock), look
for an active run, insert the run, insert the user message; with BEGIN and COMMIT, six
round trips after the thread was read. When the thread is idle (the common case: every
first message, every message after a run ended) one data-modifying statement does the
same: its CTEs touch the thread, and insert the run and then the message only if the thread
has no active run (and, for a client-chosen id, no message with that id). One round trip,
one commit.

Anything else falls back to the locking path, which decides again under the thread's lock:
a run is active (the send policy applies), the id was used (an idempotent retry), or a
concurrent send won the race (its run violates ``pai_one_active_run_per_thread``, which
aborts this statement whole: nothing of it is stored). The statement's snapshot predates
the lock wait, so that unique index, not the snapshot, is what makes the race safe.
"""

from __future__ import annotations

from enum import Enum
from functools import cache
from typing import Any

from django.db import DatabaseError, IntegrityError, connection
from django.utils import timezone

from pai_threads.models import Message, Run, Thread
from pai_threads.store.inserts import insert_sql
from pai_threads.store.prepared import prepared_cursor
from pai_threads.store.rows import active_run_exists, mark_stored
from pai_threads.store.sql import model_fields, qn

__all__ = ["FusedSend", "can_fuse_send", "start_run_fused"]


class FusedSend(Enum):
    STARTED = "started"  # the run and the message are stored and committed
    GONE = "gone"  # no such thread (deleted since it was read), scope and agent
    FALLBACK = "fallback"  # nothing stored: take the locking path


_THREAD_UPDATED_AT = model_fields(Thread, ("updated_at",))[0]
_MESSAGE_KEY = model_fields(Message, ("id",))


def can_fuse_send() -> bool:
    """Only on PostgreSQL (SQLite has no data-modifying CTEs) and in autocommit: inside a
    caller's transaction a failed statement would abort that transaction too."""
    return connection.vendor == "postgresql" and not connection.in_atomic_block


@cache
def _gate(vendor: str, check_duplicate: bool, active: str) -> str:
    """The CTEs before the inserts: ``pai_touch`` (the thread's row lock and
    ``updated_at``) and ``pai_go`` (a row when both inserts may run: no ``active`` run,
    read as a send's locking path reads it, and no such message id yet)."""
    thread, message = (qn(m._meta.db_table) for m in (Thread, Message))
    duplicate = (
        f" AND NOT EXISTS (SELECT 1 FROM {message} WHERE {message}.{qn('thread_id')} = %s "  # noqa: S608
        f"AND {message}.{qn('message_id')} = %s)"
        if check_duplicate
        else ""
    )
    # Identifiers are the models' own; every value is a parameter.
    return (
        f"pai_touch AS (UPDATE {thread} SET {qn('updated_at')} = %s "  # noqa: S608
        f"WHERE {thread}.{qn('id')} = %s AND {thread}.{qn('scope_key')} = %s "
        f"AND {thread}.{qn('agent_name')} = %s RETURNING {thread}.{qn('id')}), "
        f"pai_go AS (SELECT 1 FROM pai_touch WHERE NOT {active}{duplicate})"
    )


def start_run_fused(thread: Thread, run: Run, message: Message, *, client_id: bool) -> FusedSend:
    """Insert ``run`` and its input ``message`` for the idle ``thread`` in one statement.

    On :attr:`FusedSend.STARTED` both objects are marked stored (the message has its key),
    as :func:`~pai_threads.store.rows.insert_row` leaves them. Call only when
    :func:`can_fuse_send`."""
    now = _THREAD_UPDATED_AT.get_db_prep_save(timezone.now(), connection)
    active, active_params = active_run_exists(thread.pk)
    # The thread's scope and agent are checked too: the caller may have them remembered
    # (store.thread_headers) rather than read, and the row is what decides.
    params: list[Any] = [now, thread.pk, thread.scope_key, thread.agent_name, *active_params]
    if client_id:
        params += [thread.pk, message.message_id]
    run_sql, run_params = insert_sql(run, source="pai_go")
    message_sql, message_params = insert_sql(message, source="pai_run", returning=_MESSAGE_KEY)
    run_key = f"{qn(Run._meta.db_table)}.{qn('id')}"
    sql = (
        f"WITH {_gate(connection.vendor, client_id, active)}, "  # noqa: S608
        f"pai_run AS ({run_sql} RETURNING {run_key}), "
        f"pai_message AS ({message_sql}) "
        "SELECT (SELECT count(*) FROM pai_touch), (SELECT * FROM pai_message)"
    )
    try:
        with prepared_cursor() as cursor:
            cursor.execute(sql, [*params, *run_params, *message_params])
            touched, message_key = cursor.fetchone()
    except IntegrityError:
        return FusedSend.FALLBACK  # a concurrent send's run (or message id) came first
    except DatabaseError:
        # As a failed transaction's rollback does: a connection the error left unusable (the
        # server went away) is dropped, so the caller's next query connects anew.
        if not connection.is_usable():
            connection.close()
        raise
    if not touched:
        return FusedSend.GONE
    if message_key is None:
        return FusedSend.FALLBACK
    message.pk = message_key
    mark_stored(run)
    mark_stored(message)
    return FusedSend.STARTED
