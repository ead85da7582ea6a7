"""A claimed run as the engine receives it: the lease, and what an earlier episode left.

:func:`claim_returning` claims in one statement; a first claim needs nothing else. A resume
or a recovery also reads the run's latest step message and its executing tool calls
(at-most-once tools), two reads only those claims pay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from django.db import connection, transaction
from django.utils import timezone

from pai_agents.engine.store import ClaimedRun, Lease
from pai_agents.messages.types import MessageRole, UIMessage
from pai_threads.models import Message, PendingAction, Run
from pai_threads.store.attempts import claim_attempt_ctes, record_claim
from pai_threads.store.context_reads import context_json_sql
from pai_threads.store.fenced_writes import RUN_FIELDS, run_column
from pai_threads.store.prepared import prepared_cursor
from pai_threads.store.sql import (
    claim_update_sql,
    convert,
    input_messages,
    input_messages_sql,
    model_fields,
    queued_sql,
    returned_instance,
    returning_sql,
)

__all__ = ["Claimed", "claim_returning", "claimed_run", "lease_of"]

_RUN_TABLE = Run._meta.db_table


def lease_of(run: Run, owner: str) -> Lease:
    return Lease(
        run_id=run.id,
        owner=owner,
        token=run.lease_token,
        thread_id=run.thread_id,
        scope_key=run.scope_key,
    )


def claimed_run(run: Run, lease: Lease) -> ClaimedRun:
    """The engine's view of the claimed ``run`` (read back only on resume or recovery)."""
    last: Message | None = None
    executing: frozenset[str] = frozenset()
    if run.step_count or run.attempt > 1:
        # Resume or recovery: what the previous episode left behind.
        last = (
            Message.objects.filter(run_id=run.id, step_index__isnull=False)
            .only("message_id", "role", "parts", "status")
            .order_by("-step_index")
            .first()
        )
        executing = frozenset(
            PendingAction.objects.filter(
                run_id=run.id, status=PendingAction.Status.EXECUTING
            ).values_list("tool_call_id", flat=True)
        )
    return ClaimedRun(
        lease=lease,
        thread_id=run.thread_id,
        agent_name=run.agent_name,
        scope_key=run.scope_key,
        identity=run.identity,
        client_data=run.client_data,
        initiator=run.initiator,
        step_count=run.step_count,
        attempt=run.attempt,
        usage=run.usage,
        last_message=(
            UIMessage(id=last.message_id, role=cast(MessageRole, last.role), parts=last.parts)
            if last
            else None
        ),
        last_message_open=bool(last and last.status == Message.Status.OPEN),
        executing_tool_calls=executing,
        started_at=run.started_at,
        cancel_requested=run.cancel_requested_at is not None,  # LC-137: settle, then end
    )


_CLAIM_FIELDS = RUN_FIELDS + model_fields(
    Run,
    ("agent_name", "scope_key", "identity", "client_data", "lease_token", "cancel_requested_at"),
)


@dataclass(frozen=True)
class Claimed:
    """What a claim returned: the run, whether its thread has queued input, its input
    messages, and (when asked for, on PostgreSQL) the thread's context window as the
    statement read it, still JSON: :func:`messages_of_context_json` reads it if it is used."""

    run: Run
    queued: bool
    inputs: list[Message]
    context: Any = None


def claim_returning(
    run_id: str,
    *,
    owner: str,
    lease_seconds: float,
    with_context: bool = False,
    context_window: int | None = None,
) -> Claimed | None:
    """Claim in one statement: a conditional UPDATE ... RETURNING, in autocommit (and the
    claim's attempt row: CTEs of it on PostgreSQL, else in one transaction with it).

    The WHERE clause is the whole claim rule (queued, or running with an expired lease); the
    token increment is the fence every later write of this execution checks. It returns the
    run, whether the thread has queued input (the first steer check), and the run's input
    messages (announced to subscribers at once): one round trip instead of three.
    ``with_context``: on PostgreSQL it also returns the thread's context window (its newest
    ``context_window`` messages; None: all), the read the engine makes next: one more saved.
    """
    # The lease starts once a connection is in hand: a claim that waited for one (a pool
    # emptied by a burst of sends) must not begin with a lease that already ran out.
    connection.ensure_connection()
    now = timezone.now()
    expires = now + timedelta(seconds=lease_seconds)
    sql, params = claim_update_sql(run_id, owner=owner, expires=expires, now=now)
    queued, queued_params = queued_sql(run_column("thread_id"))
    inputs, inputs_params = input_messages_sql(run_column("id"))
    sql += f" RETURNING {returning_sql(_CLAIM_FIELDS, _RUN_TABLE)}, {queued}, {inputs}"
    params += [*queued_params, *inputs_params]
    postgres = connection.vendor == "postgresql"
    with_context = with_context and postgres
    if with_context:
        context, context_params = context_json_sql(run_column("thread_id"), context_window)
        sql += f", {context}"
        params += context_params
    if postgres:
        # The attempt history in the same statement: no extra round trip (docs/benchmarks.md).
        attempts, attempt_params = claim_attempt_ctes(
            run_id, owner=owner, now=now, source="pai_claim"
        )
        sql = f"WITH pai_claim AS ({sql}), {attempts} SELECT * FROM pai_claim"  # noqa: S608
        row = _claim_row(sql, [*params, *attempt_params])
    else:
        with transaction.atomic():
            row = _claim_row(sql, params)
            if row is not None:
                claimed = returned_instance(Run, convert(_CLAIM_FIELDS, row))
                record_claim(claimed, owner=owner, now=now)
    if row is None:
        return None
    width = len(_CLAIM_FIELDS)
    return Claimed(
        run=returned_instance(Run, convert(_CLAIM_FIELDS, row[:width])),
        queued=bool(row[width]),
        inputs=input_messages(row[width + 1]),
        context=row[width + 2] if with_context else None,
    )


def _claim_row(sql: str, params: list[Any]) -> Sequence[Any] | None:
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()
