"""The attempt history (RunAttempt): written beside the lease writes it records.

A claim inserts its attempt and ends one still open (``taken_over``: its worker is gone or
the run was claimed again); the fenced write that ends the run or makes it wait ends the
attempt of its lease token; the sweeper ends the attempt of a lease it finds expired
(``lease_lost``). On PostgreSQL the claim's and the end's rows are more CTEs of the claim or
fencing statement (no extra round trip); elsewhere one more statement in the same
transaction. Every end is conditional on the lease it records, so a fenced-out worker's late
write changes nothing here either.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Exists, OuterRef

from pai_agents.engine.store import Lease
from pai_threads.models import Run, RunAttempt
from pai_threads.models.attempts import USUAL_REASONS
from pai_threads.store.inserts import insert_sql
from pai_threads.store.prepared import prepared_cursor
from pai_threads.store.rows import insert_row
from pai_threads.store.sql import lease_expired, model_fields, qn

__all__ = [
    "END_STATUSES",
    "AttemptEnd",
    "attempt_end",
    "claim_attempt_ctes",
    "end_attempt",
    "end_attempt_sql",
    "record_claim",
    "record_lost_leases",
]

End = RunAttempt.End

#: The run statuses that end an attempt: stored with no reason (``ended`` says it all;
#: ``RunAttempt.explanation`` names it).
END_STATUSES = frozenset(USUAL_REASONS)
TAKEN_OVER = "still open when a new claim took the run (lease expired or run re-queued)"
LEASE_LOST = "lease expired without a heartbeat; the sweeper re-dispatched the run"

AttemptEnd = tuple[str, str]


def attempt_end(changes: dict[str, Any]) -> AttemptEnd | None:
    """(how, reason) when a fencing write's ``changes`` end the attempt; else None."""
    status = changes.get("status")
    if status in END_STATUSES:
        return str(status), ""
    return None


def _end_values(end: AttemptEnd, now: datetime) -> dict[str, Any]:
    return {"ended": end[0], "reason": end[1], "ended_at": now}


_END_FIELDS = model_fields(RunAttempt, ("ended", "reason", "ended_at"))


@cache
def _end_update(vendor: str, by_token: bool) -> str:
    """The UPDATE ending an attempt, its text built once: the attempt of one lease token, or
    (``by_token`` False) the run's attempt still open. The ORM compiled it for every run."""
    table = qn(RunAttempt._meta.db_table)
    sets = ", ".join(f"{qn(str(f.column))} = %s" for f in _END_FIELDS)
    which = f"{table}.{qn('lease_token')} = %s" if by_token else f"{table}.{qn('ended_at')} IS NULL"
    return f"UPDATE {table} SET {sets} WHERE ({table}.{qn('run_id')} = %s AND {which})"  # noqa: S608


def _end_sql(
    run_id: str, token: int | None, end: AttemptEnd, now: datetime
) -> tuple[str, list[Any]]:
    """End the attempt of ``token`` (None: the run's open attempt) as ``end``, at ``now``."""
    conn = connections[DEFAULT_DB_ALIAS]
    params = [
        f.get_db_prep_save(v, connection=conn)
        for f, v in zip(_END_FIELDS, (end[0], end[1], now), strict=True)
    ]
    params.append(run_id)
    if token is not None:
        params.append(token)
    return _end_update(conn.vendor, token is not None), params


def end_attempt_sql(
    lease: Lease, end: AttemptEnd, now: datetime, *, source: str
) -> tuple[str, list[Any]]:
    """The UPDATE ending ``lease``'s attempt, written only if the fencing CTE ``source``
    matched (PostgreSQL: a CTE of the fencing statement)."""
    sql, params = _end_sql(lease.run_id, lease.token, end, now)
    return f"{sql} AND EXISTS (SELECT 1 FROM {source})", params  # noqa: S608


def end_attempt(lease: Lease, end: AttemptEnd, now: datetime) -> None:
    """End ``lease``'s attempt, inside the transaction whose fencing UPDATE just held."""
    sql, params = _end_sql(lease.run_id, lease.token, end, now)
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)


def claim_attempt_ctes(
    run_id: str, *, owner: str, now: datetime, source: str
) -> tuple[str, list[Any]]:
    """PostgreSQL: the claim's attempt rows as two more CTEs over the claim CTE ``source``:
    an attempt still open is taken over, the new one is inserted (both see the table as it
    was before the statement, so the new row is not the one taken over)."""
    taken, taken_params = _end_sql(run_id, None, (End.TAKEN_OVER, TAKEN_OVER), now)
    attempt = RunAttempt(worker=owner, claimed_at=now)
    columns = {"run_id": "id", "number": "attempt", "lease_token": "lease_token"}
    insert, insert_params = insert_sql(
        attempt,
        source=source,
        columns={name: f"{source}.{qn(column)}" for name, column in columns.items()},
    )
    sql = (
        f"pai_taken AS ({taken} AND EXISTS (SELECT 1 FROM {source})), "  # noqa: S608
        f"pai_attempt AS ({insert})"
    )
    return sql, [*taken_params, *insert_params]


def record_claim(run: Run, *, owner: str, now: datetime) -> None:
    """Elsewhere: the same two writes, in the claim's transaction (a first claim has no
    earlier attempt to take over)."""
    if run.attempt > 1:
        sql, params = _end_sql(run.id, None, (End.TAKEN_OVER, TAKEN_OVER), now)
        with prepared_cursor() as cursor:
            cursor.execute(sql, params)
    insert_row(
        RunAttempt(
            run_id=run.id,
            number=run.attempt,
            worker=owner,
            lease_token=run.lease_token,
            claimed_at=now,
        )
    )


def record_lost_leases(run_ids: list[str], now: datetime) -> int:
    """The sweeper: end the open attempts of these runs whose lease (same token) expired.

    A worker that was only slow may still renew its expired lease (the heartbeat) and end
    the run: its end write, fenced by the same token, then replaces this ``lease_lost``."""
    if not run_ids:
        return 0
    expired = Run.objects.filter(
        lease_expired(now), id=OuterRef("run_id"), lease_token=OuterRef("lease_token")
    )
    return (
        RunAttempt.objects.filter(run_id__in=run_ids, ended_at__isnull=True)
        .filter(Exists(expired))
        .update(**_end_values((End.LEASE_LOST, LEASE_LOST), now))
    )
