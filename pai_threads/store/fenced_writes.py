"""The fenced writes the ORM store is built from: each statement conditional on the lease.

A fencing UPDATE (:func:`fence_returning`) opens every write transaction of an execution and
returns the run row's columns the realtime publisher needs; the step, message and claim
statements beside it return what they wrote, so nothing is read back
(:class:`~pai_threads.store.thread_store.ORMThreadStore` composes them).

The hot path (claim, step commits, tool results; docs/benchmarks.md W1) spends as few
statements as the guarantees allow: writes return what they wrote (``RETURNING``) into the
store's ``RunFacts`` for the realtime publisher, the fencing UPDATE also reports the
thread's queue (so an empty queue costs no steer check and no admission query), a message
update without a run change is one statement fenced by a locking ``EXISTS`` on the run row,
and on PostgreSQL a step commit is one data-modifying CTE (fence, message, Step row).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.utils import timezone

from pai_agents.engine.store import (
    TERMINAL_STATUSES,
    Lease,
    LeaseLost,
    RunOutcome,
)
from pai_agents.json import ensure_strict_json
from pai_agents.messages.parts import check_part_types
from pai_agents.messages.types import UIMessage
from pai_threads.models import Message, QueueItem, Run, Step
from pai_threads.store.admission import admit_next, lock_thread
from pai_threads.store.attempts import (
    attempt_end,
    end_attempt,
    end_attempt_sql,
)
from pai_threads.store.inserts import insert_sql
from pai_threads.store.prepared import prepared_cursor
from pai_threads.store.rows import insert_row
from pai_threads.store.sql import (
    MESSAGE_COLUMNS,
    column_of,
    convert,
    fenced_update_sql,
    held_exists_sql,
    model_fields,
    parts_update_sql,
    pending_sql,
    qn,
    queued_sql,
    returned_instance,
    returning_sql,
    update_sql,
)
from pai_threads.subagents.outcomes import answer_parent

__all__ = [
    "MESSAGE_FIELDS",
    "RUN_FIELDS",
    "Fenced",
    "MessageKey",
    "after_end",
    "before_end",
    "end_gate_sql",
    "fence_returning",
    "message_key",
    "message_of",
    "outcome_changes",
    "output_message",
    "parts_statement",
    "parts_written",
    "replace_open",
    "replace_statement",
    "run_column",
    "step_statement",
    "step_written",
    "stored_parts",
    "update_parts",
    "write_step",
]

_RUN_TABLE = Run._meta.db_table
# What a client projection of a run needs (run_public), returned by every fencing write.
RUN_FIELDS = model_fields(
    Run,
    (
        "id",
        "thread_id",
        "status",
        "initiator",
        "step_count",
        "attempt",
        "usage",
        "metadata",
        "created_at",
        "started_at",
        "finished_at",
        "parent_run_id",
        "parent_tool_call_id",
    ),
)
MESSAGE_FIELDS = model_fields(Message, MESSAGE_COLUMNS)


@dataclass(frozen=True)
class Fenced:
    """What a fencing UPDATE returned: the run row after it, and the thread's side state
    as the transaction sees it (``pending`` is only asked for when a run ends)."""

    run: Run
    queued: bool
    pending: bool


def run_column(name: str) -> str:
    return column_of(_RUN_TABLE, name)


def _fence_sql(
    lease: Lease,
    changes: dict[str, Any],
    *,
    sides: bool,
    gate: bool = False,
    open_step: int | None = None,
) -> tuple[str, list[Any]]:
    """The fencing UPDATE, returning the run, ``EXISTS`` queued input [, pending actions].

    In the transaction that ends a run the thread lock is taken by an earlier statement, so
    this statement's snapshot already holds every queued input a send could have added.
    ``gate`` (PostgreSQL, in autocommit): the end gate takes that lock and reads the queue
    itself, before the run row is locked (see :func:`end_gate_sql`). ``open_step``: only
    while that step has its open row (the one :func:`replace_statement` commits).
    """
    sql, params = fenced_update_sql(lease, changes)
    if open_step is not None:
        sql = f"{sql} AND EXISTS ({_open_row_sql()})"
        params += [lease.run_id, open_step, Message.Status.OPEN.value]
    if gate:
        gated, gate_params = end_gate_sql(lease)
        sql = f"{sql} AND {gated}"
        params += gate_params
    queued, queued_params = queued_sql(run_column("thread_id"))
    columns = [returning_sql(RUN_FIELDS, _RUN_TABLE), queued]
    params += queued_params
    if sides:
        pending, pending_params = pending_sql(run_column("thread_id"))
        columns.append(pending)
        params += pending_params
    return f"{sql} RETURNING {', '.join(columns)}", params


def end_gate_sql(lease: Lease) -> tuple[str, list[Any]]:
    """The end gate, a condition of the fencing UPDATE's WHERE clause (PostgreSQL).

    ``pai_threads_end_gate`` (migration 0020) takes the thread lock, then reads the queue
    with a fresh snapshot (a VOLATILE function's queries take their own; the statement's
    predates the lock wait), so a run's last write is one autocommit statement instead of a
    transaction of BEGIN, the thread lock, the write and COMMIT. It is false (no row
    matches, nothing is written) when input is queued or the run is a sub-agent's. Called
    from the WHERE clause, after the lease conditions, it locks the thread before the run
    row is locked: thread, then run, the one lock order
    (:func:`~pai_threads.store.admission.lock_thread`).
    """
    parent = run_column("parent_run_id")
    sql = f"pai_threads_end_gate(%s, %s, {parent})"
    return sql, [lease.thread_id, QueueItem.Status.QUEUED.value]


def _fenced_row(row: Sequence[Any], *, sides: bool) -> Fenced:
    width = len(RUN_FIELDS)
    return Fenced(
        run=returned_instance(Run, convert(RUN_FIELDS, row[:width])),
        queued=bool(row[width]),
        pending=bool(row[width + 1]) if sides else True,
    )


def fence_returning(
    lease: Lease, changes: dict[str, Any] | None = None, *, sides: bool = False
) -> Fenced:
    """:func:`fence` that also returns the run row and the thread's side state.

    When ``changes`` end the attempt (the run ends or waits), its RunAttempt row is ended
    too: on PostgreSQL by a CTE of the same statement, elsewhere by one more statement of
    the caller's transaction (which every ending write opens)."""
    changes = changes or {}
    sql, params = _fence_sql(lease, changes, sides=sides)
    end = attempt_end(changes)
    postgres = connection.vendor == "postgresql"
    if end is not None and postgres:
        ending, end_params = end_attempt_sql(lease, end, _ended_at(changes), source="pai_fence")
        sql = f"WITH pai_fence AS ({sql}), pai_ended AS ({ending}) SELECT * FROM pai_fence"  # noqa: S608
        params = [*params, *end_params]
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise LeaseLost(lease.run_id)
    if end is not None and not postgres:
        end_attempt(lease, end, _ended_at(changes))
    return _fenced_row(row, sides=sides)


def _ended_at(changes: dict[str, Any]) -> Any:
    """When the attempt ended: the run's ``finished_at`` when it ends, so the two agree."""
    return changes.get("finished_at") or timezone.now()


def _message_row(values: Sequence[Any]) -> Message:
    return returned_instance(Message, convert(MESSAGE_FIELDS, values))


def step_statement(
    lease: Lease,
    changes: dict[str, Any],
    message: Message,
    step: Step,
    *,
    sides: bool,
    gate: bool = False,
) -> tuple[str, list[Any]]:
    """:func:`write_step`'s one statement on PostgreSQL (a data-modifying CTE: the inserts
    select from the fencing UPDATE, so a lost lease inserts nothing); its row goes to
    :func:`step_written`. Sent by a store thread or by the run loop's own connection."""
    fencing = _fence_sql(lease, changes, sides=sides, gate=gate)
    insert = insert_sql(message, source="pai_fence", returning=MESSAGE_FIELDS)
    return _step_cte(lease, changes, fencing, insert, step)


def _step_cte(
    lease: Lease,
    changes: dict[str, Any],
    fencing: tuple[str, list[Any]],
    message: tuple[str, list[Any]],
    step: Step,
) -> tuple[str, list[Any]]:
    """``fencing``, then ``message`` (writing the step's message FROM pai_fence, returning
    it), the Step row and the attempt's end: one data-modifying CTE."""
    # The step records the attempt that wrote it: the one the fencing UPDATE held.
    step_insert, step_params = insert_sql(
        step,
        source="pai_message",
        columns={
            "message_id": f"pai_message.{qn('id')}",
            "attempt": f"(SELECT {qn('attempt')} FROM pai_fence)",  # noqa: S608
        },
    )
    ending, end_params = "", list[Any]()
    end = attempt_end(changes)
    if end is not None:
        ended, end_params = end_attempt_sql(lease, end, _ended_at(changes), source="pai_fence")
        ending = f", pai_ended AS ({ended})"
    sql = (
        f"WITH pai_fence AS ({fencing[0]}), pai_message AS ({message[0]}), "  # noqa: S608
        f"pai_step AS ({step_insert}){ending} SELECT * FROM pai_fence, pai_message"
    )
    return sql, [*fencing[1], *message[1], *step_params, *end_params]


def step_written(
    lease: Lease, row: Sequence[Any] | None, *, sides: bool, gate: bool = False
) -> tuple[Fenced, Message]:
    """What :func:`step_statement` returned; no row raises :class:`LeaseLost` (a lost
    lease, or a closed gate: the caller tells them apart)."""
    if row is None:
        raise LeaseLost(lease.run_id)
    width = len(RUN_FIELDS) + (2 if sides else 1)
    fenced = _fenced_row(row[:width], sides=sides)
    if gate:  # the gate read the queue under the lock: nothing queued (or no row)
        fenced = Fenced(run=fenced.run, queued=False, pending=fenced.pending)
    return fenced, _message_row(row[width:])


def write_step(
    lease: Lease,
    changes: dict[str, Any],
    message: Message,
    step: Step,
    *,
    sides: bool,
    gate: bool = False,
) -> tuple[Fenced, Message]:
    """Fence the run (applying ``changes``), insert the step's message and Step row.

    On PostgreSQL this is one statement (:func:`step_statement`), atomic on its own;
    elsewhere three statements in the caller's transaction. ``gate``: the statement ends
    the run on its own, in autocommit, behind the end gate (:func:`end_gate_sql`); a closed
    gate matches no row and raises :class:`LeaseLost` like a lost lease.
    """
    if connection.vendor == "postgresql":
        sql, params = step_statement(lease, changes, message, step, sides=sides, gate=gate)
        with prepared_cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        return step_written(lease, row, sides=sides, gate=gate)
    fenced = fence_returning(lease, changes, sides=sides)
    insert, insert_params = insert_sql(message, returning=MESSAGE_FIELDS)
    with prepared_cursor() as cursor:
        cursor.execute(insert, insert_params)
        stored = _message_row(cursor.fetchone())
    step.message_id, step.attempt = stored.pk, fenced.run.attempt
    insert_row(step)  # its INSERT built once (Model.save compiles it afresh every time)
    return fenced, stored


def parts_statement(lease: Lease, rows: Any, parts: Any, *, fenced: bool) -> tuple[str, list[Any]]:
    """:func:`update_parts`' statement; its row goes to :func:`parts_written`."""
    if isinstance(rows, MessageKey):
        sql, params = parts_update_sql(rows.run_id, rows.message_id, parts, timezone.now())
    else:
        sql, params = update_sql(rows, {"parts": parts, "updated_at": timezone.now()})
    if fenced:
        held, held_params = held_exists_sql(lease)
        sql += f" AND {held}"
        params += held_params
    queued, queued_params = queued_sql(f"{qn(Message._meta.db_table)}.{qn('thread_id')}")
    sql += f" RETURNING {returning_sql(MESSAGE_FIELDS, Message._meta.db_table)}, {queued}"
    return sql, [*params, *queued_params]


def parts_written(row: Sequence[Any] | None) -> tuple[Message, bool] | None:
    """The row :func:`parts_statement` returned and ``EXISTS`` queued input; None: no row."""
    if row is None:
        return None
    return _message_row(row[:-1]), bool(row[-1])


def update_parts(
    lease: Lease, rows: Any, parts: Any, *, fenced: bool
) -> tuple[Message, bool] | None:
    """UPDATE the parts of ``rows`` (one message), returning the row and ``EXISTS`` queued
    input; None when nothing matched.

    ``fenced``: the statement fences itself with a locking ``EXISTS`` on the run row (the
    lock a fencing UPDATE takes, released at the statement's commit), so a message update
    without a run change is one autocommit statement.
    """
    sql, params = parts_statement(lease, rows, parts, fenced=fenced)
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return parts_written(cursor.fetchone())


# What a step's commit writes into its open row (a checkpoint's, or a dead attempt's).
_REPLACED = ("message_id", "parts", "metadata", "usage", "diagnostics", "status", "updated_at")
_REPLACED_FIELDS = model_fields(Message, _REPLACED)


@cache
def _open_row_where() -> str:
    """The step's open row: run, step index and status (parameters in that order)."""
    table = Message._meta.db_table
    return " AND ".join(
        f"{column_of(table, name)} = %s" for name in ("run_id", "step_index", "status")
    )


@cache
def _replace_open(vendor: str, source: str | None = None) -> str:
    table = Message._meta.db_table
    sets = ", ".join(f"{qn(name)} = %s" for name in _REPLACED)
    returning = returning_sql(MESSAGE_FIELDS, table)
    joined = f" FROM {source}" if source else ""
    return (
        f"UPDATE {qn(table)} SET {sets}{joined} WHERE ({_open_row_where()}) "  # noqa: S608
        f"RETURNING {returning}"
    )


@cache
def _open_row_sql() -> str:
    return f"SELECT 1 FROM {qn(Message._meta.db_table)} WHERE {_open_row_where()}"  # noqa: S608


def _replaced_params(lease: Lease, fields: dict[str, Any], step_index: int) -> list[Any]:
    conn = connections[DEFAULT_DB_ALIAS]
    values = {**fields, "status": Message.Status.COMMITTED, "updated_at": timezone.now()}
    params = [f.get_db_prep_save(values[f.attname], connection=conn) for f in _REPLACED_FIELDS]
    return [*params, lease.run_id, step_index, Message.Status.OPEN.value]


def replace_statement(
    lease: Lease, changes: dict[str, Any], fields: dict[str, Any], step: Step, *, ends: bool
) -> tuple[str, list[Any]]:
    """A checkpointed step's commit in one statement (PostgreSQL): the fencing UPDATE (only
    while the step's open row exists; behind the end gate when the step ends the run), the
    open row rewritten as ``fields`` and the Step row, as :func:`step_statement` does for a
    new message; its row goes to :func:`step_written`. No row: the lease is lost, the gate
    closed or the open row gone, and nothing was written (the caller's transaction tells)."""
    fencing = _fence_sql(lease, changes, sides=ends, gate=ends, open_step=int(step.index))
    update = _replace_open("postgresql", source="pai_fence")
    replaced = (update, _replaced_params(lease, fields, int(step.index)))
    return _step_cte(lease, changes, fencing, replaced, step)


def replace_open(lease: Lease, fields: dict[str, Any], step_index: int) -> Message | None:
    """Commit the step's open row as ``fields`` say, in the caller's fenced transaction:
    one prebuilt UPDATE returning the row (None when the step has no open row)."""
    params = _replaced_params(lease, fields, step_index)
    with prepared_cursor() as cursor:
        cursor.execute(_replace_open(connection.vendor), params)
        row = cursor.fetchone()
    return None if row is None else _message_row(row)


@dataclass(frozen=True)
class MessageKey:
    """One message of the run, by id: what :func:`update_parts` updates without the ORM."""

    run_id: str
    message_id: str


def message_key(lease: Lease, message: UIMessage) -> MessageKey:
    return MessageKey(run_id=lease.run_id, message_id=message["id"])


def message_of(lease: Lease, message: UIMessage) -> Any:
    return Message.objects.filter(run_id=lease.run_id, message_id=message["id"])


def output_message(
    lease: Lease, message: UIMessage, step_index: int, *, parts: Any = None
) -> dict[str, Any]:
    """A step message's row fields; ``parts``: its :func:`stored_parts` when the caller
    has them already (checked and copied once per checkpoint)."""
    return {
        "message_id": message["id"],
        "thread_id": lease.thread_id,
        "scope_key": lease.scope_key,
        "run_id": lease.run_id,
        "role": message["role"],
        "parts": stored_parts(message) if parts is None else parts,
        # A hook response's public metadata (checked in synthetic.response_metadata), as it
        # streamed in ``start``: stored, so the committed row equals the live one (LC-108).
        "metadata": ensure_strict_json(
            {k: v for k, v in (message.get("metadata") or {}).items() if k != "pai"},
            what="message metadata",
        ),
        "producer": Message.Producer.MODEL,
        "relation": Message.Relation.OUTPUT,
        "step_index": step_index,
    }


def stored_parts(message: UIMessage) -> Any:
    """A step message's parts as stored: the pinned AI SDK grammar (MF-045, raising
    ``UnknownPartType``) and strict JSON."""
    check_part_types(message["parts"], what=f"message {message['id']}")
    return ensure_strict_json(message["parts"], what="message parts")


def before_end(lease: Lease, outcome: RunOutcome | None) -> bool:
    """First in a transaction that may end the run: take the thread lock (see lock_thread).
    True when the run ends (then the thread's queue and pending actions are asked for)."""
    ends = outcome is not None and outcome.status in TERMINAL_STATUSES
    if ends:
        lock_thread(lease.thread_id)
    return ends


def after_end(lease: Lease, fenced: Fenced) -> None:
    """Inside the ending transaction: the next queued input starts once the run ends (the
    fencing UPDATE saw the queue after the thread lock: nothing queued, nothing to admit)."""
    if fenced.queued:
        admit_next(lease.thread_id)
    if fenced.run.parent_run_id:  # a sub-agent run: its end answers the parent's call
        answer_parent(lease.run_id)


def outcome_changes(outcome: RunOutcome) -> dict[str, Any]:
    changes: dict[str, Any] = {
        "status": outcome.status,
        "usage": ensure_strict_json(dict(outcome.usage), what="usage"),
        "error": dict(outcome.error) if outcome.error else None,
    }
    if outcome.status in TERMINAL_STATUSES or outcome.status == Run.Status.WAITING:
        changes.update(lease_owner="", lease_expires_at=None)
    if outcome.status in TERMINAL_STATUSES:
        changes["finished_at"] = timezone.now()
    return changes
