"""Committing a step: its rows, and how many statements writing them takes.

A step whose message has no open row (:func:`commit_new_step`):

- A step that does not end the run, on PostgreSQL: one autocommit statement (the fencing
  CTE of :func:`~pai_threads.store.fenced_writes.step_statement`).
- A step that ends the run, on PostgreSQL: the same statement behind the end gate
  (:func:`~pai_threads.store.fenced_writes.end_gate_sql`), still one autocommit statement.
  When the gate is closed (queued input to admit, a sub-agent's run whose end answers its
  parent) the statement matches no row and stores nothing, as with a lost lease: the step
  then ends the run in the transaction below, which fences again (and raises LeaseLost if
  the lease is what was lost).
- Otherwise (SQLite, or the gate closed): a transaction that takes the thread lock, writes
  the step and, when the run ends, admits the next queued input (``after_end``).

W1 measured the gate at -0.57 ms per run against the transaction (BEGIN, lock, CTE, COMMIT:
four round trips and Django's transaction bookkeeping; docs/benchmarks.md).
:func:`acommit_new_step` sends the one statement from the run's loop on its own connection
(:mod:`~pai_threads.store.loop_connections`); only the transaction goes to a store thread.
A step whose open row a checkpoint wrote is committed by :func:`commit_replacing`: on
PostgreSQL one statement too (the open row rewritten in the fencing CTE, behind the gate when
the run ends), the transaction when it wrote nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from pai_agents.engine.store import (
    TERMINAL_STATUSES,
    Lease,
    LeaseLost,
    RunOutcome,
    StepRecord,
    step_diagnostics,
)
from pai_agents.json import ensure_strict_json
from pai_agents.messages.types import UIMessage
from pai_threads.models import Message, Step
from pai_threads.store.db import run_db
from pai_threads.store.fenced_writes import (
    Fenced,
    after_end,
    before_end,
    fence_returning,
    outcome_changes,
    output_message,
    replace_open,
    replace_statement,
    step_statement,
    step_written,
    write_step,
)
from pai_threads.store.loop_connections import LoopConnections
from pai_threads.store.prepared import prepared_cursor
from pai_threads.store.rows import insert_row, mark_stored
from pai_threads.store.sql import new_instance

__all__ = [
    "StepRows",
    "acommit_new_step",
    "acommit_replacing",
    "commit_new_step",
    "commit_replacing",
    "step_rows",
]


@dataclass(frozen=True)
class StepRows:
    """What a step's commit writes: the run's changes, the message's fields, the Step row."""

    run_changes: dict[str, Any]
    fields: dict[str, Any]
    step: Step
    ends: bool  # the run ends with this step


def step_rows(
    lease: Lease, message: UIMessage, step: StepRecord, outcome: RunOutcome | None
) -> StepRows:
    """The rows of a step's commit, checked before anything is written (MF-045)."""
    run_changes: dict[str, Any] = {"step_count": step.index + 1}
    if outcome is not None:
        run_changes.update(outcome_changes(outcome))
    fields = output_message(lease, message, step.index)
    # MF-002: the step's own usage and diagnostics travel with its message.
    fields["usage"] = ensure_strict_json(dict(step.usage), what="usage")
    fields["diagnostics"] = ensure_strict_json(step_diagnostics(step), what="diagnostics")
    step_row = new_instance(
        Step,
        {
            "run_id": lease.run_id,
            "index": step.index,
            "request": ensure_strict_json(dict(step.request), what="step request"),
            "usage": fields["usage"],
            "finish_reason": step.finish_reason,
            "started_at": step.started_at,
            "finished_at": step.finished_at,
        },
    )
    ends = outcome is not None and outcome.status in TERMINAL_STATUSES
    return StepRows(run_changes=run_changes, fields=fields, step=step_row, ends=ends)


def commit_new_step(
    lease: Lease, rows: StepRows, outcome: RunOutcome | None
) -> tuple[Fenced, Message]:
    """Fence the run, insert the step's message and Step row, and end the run when
    ``rows.ends`` (see the module docstring)."""
    message = new_instance(Message, rows.fields)
    if connection.vendor == "postgresql":
        if not rows.ends:
            return write_step(lease, rows.run_changes, message, rows.step, sides=False)
        try:
            return write_step(lease, rows.run_changes, message, rows.step, sides=True, gate=True)
        except LeaseLost:
            pass  # the gate was closed, or the lease is lost: the transaction tells
    return _end_in_transaction(lease, rows, message, outcome)


def _end_in_transaction(
    lease: Lease, rows: StepRows, message: Message, outcome: RunOutcome | None
) -> tuple[Fenced, Message]:
    with transaction.atomic():
        before_end(lease, outcome)
        fenced, row = write_step(lease, rows.run_changes, message, rows.step, sides=rows.ends)
        if rows.ends:
            after_end(lease, fenced)
    return fenced, row


async def acommit_new_step(
    conns: LoopConnections, lease: Lease, rows: StepRows, outcome: RunOutcome | None
) -> tuple[Fenced, Message]:
    """:func:`commit_new_step` on PostgreSQL from the run's loop: the one statement on the
    loop's connection ``conns``, the closed gate's transaction on a store thread."""
    message = new_instance(Message, rows.fields)
    ends = rows.ends
    sql, params = step_statement(lease, rows.run_changes, message, rows.step, sides=ends, gate=ends)
    row = await conns.fetchone(sql, params)
    if row is not None or not ends:
        return step_written(lease, row, sides=ends, gate=ends)
    # The gate was closed, or the lease is lost: the transaction tells.
    return await run_db(_end_in_transaction, lease, rows, message, outcome)


def commit_replacing(
    lease: Lease, rows: StepRows, outcome: RunOutcome | None
) -> tuple[Fenced, Message]:
    """A checkpoint's (or a dead attempt's) open row becomes the committed message (every
    streamed answer longer than a checkpoint ends here): on PostgreSQL one statement
    (:func:`~pai_threads.store.fenced_writes.replace_statement`), else, or when it wrote
    nothing, :func:`_replace_in_transaction`."""
    if connection.vendor == "postgresql":
        sql, params = replace_statement(
            lease, rows.run_changes, rows.fields, rows.step, ends=rows.ends
        )
        with prepared_cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is not None:
            return step_written(lease, row, sides=rows.ends, gate=rows.ends)
    return _replace_in_transaction(lease, rows, outcome)


async def acommit_replacing(
    conns: LoopConnections, lease: Lease, rows: StepRows, outcome: RunOutcome | None
) -> tuple[Fenced, Message]:
    """:func:`commit_replacing` from the run's loop: the one statement on ``conns``, the
    transaction (the gate closed, the lease lost, no open row) on a store thread."""
    sql, params = replace_statement(lease, rows.run_changes, rows.fields, rows.step, ends=rows.ends)
    row = await conns.fetchone(sql, params)
    if row is not None:
        return step_written(lease, row, sides=rows.ends, gate=rows.ends)
    return await run_db(_replace_in_transaction, lease, rows, outcome)


def _replace_in_transaction(
    lease: Lease, rows: StepRows, outcome: RunOutcome | None
) -> tuple[Fenced, Message]:
    """Prebuilt statements in a transaction that takes the thread lock when the run ends;
    a step without its open row (gone with a dead attempt's cleanup) inserts its message."""
    with transaction.atomic():
        ends = before_end(lease, outcome)
        fenced = fence_returning(lease, rows.run_changes, sides=ends)
        row = replace_open(lease, rows.fields, rows.step.index)
        if row is None:
            row = insert_row(new_instance(Message, rows.fields))
        rows.step.message_id, rows.step.attempt = row.pk, fenced.run.attempt
        insert_row(rows.step)
        if ends:
            after_end(lease, fenced)
    return fenced, mark_stored(row)
