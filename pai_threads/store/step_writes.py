"""Committing a step whose message has no open row: how many statements it takes.

- A step that does not end the run, on PostgreSQL: one autocommit statement (the fencing
  CTE of :func:`~pai_threads.store.fenced_writes.write_step`).
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
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from pai_agents.engine.store import Lease, LeaseLost, RunOutcome
from pai_threads.models import Message, Step
from pai_threads.store.fenced_writes import Fenced, after_end, before_end, write_step

__all__ = ["commit_new_step"]


def commit_new_step(
    lease: Lease,
    run_changes: dict[str, Any],
    message: Message,
    step_row: Step,
    outcome: RunOutcome | None,
    *,
    ends: bool,
) -> tuple[Fenced, Message]:
    """Fence the run, insert the step's message and Step row, and end the run when
    ``ends`` (see the module docstring)."""
    if connection.vendor == "postgresql":
        if not ends:
            return write_step(lease, run_changes, message, step_row, sides=False)
        try:
            return write_step(lease, run_changes, message, step_row, sides=True, gate=True)
        except LeaseLost:
            pass  # the gate was closed, or the lease is lost: the transaction tells
    with transaction.atomic():
        before_end(lease, outcome)
        fenced, row = write_step(lease, run_changes, message, step_row, sides=ends)
        if ends:
            after_end(lease, fenced)
    return fenced, row
