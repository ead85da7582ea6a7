"""Admission of queued input: when a thread's run ends, its next queued message starts.

Called inside the transaction that ends the run, so "run ended" and "next run exists" are
one fact: there is never a moment with queued input and no run to drain it.

Also :func:`new_run`, the run a send or a trigger starts (built, not yet stored).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, Value, When
from django.utils import timezone

from pai_agents.agent import AgentDefinition
from pai_threads.events.projections import message_public
from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import message_committed
from pai_threads.executors import get_executor
from pai_threads.models import Message, PendingAction, QueueItem, Run, Thread
from pai_threads.store.prepared import prepared_cursor
from pai_threads.store.rewrites import run_metadata_defaults
from pai_threads.store.sql import qn

__all__ = ["admit_next", "dispatch_after_commit", "lock_thread", "new_run", "resume_if_answered"]


def new_run(
    thread: Thread,
    agent: AgentDefinition,
    *,
    initiator: str,
    identity: dict[str, Any],
    client_data: dict[str, Any],
) -> Run:
    """A run of ``thread``'s agent, not yet stored: ``identity`` and ``client_data``
    already validated by ``agent``, the metadata bags its parsed defaults (AD-031)."""
    return Run(
        thread=thread,
        scope_key=thread.scope_key,
        agent_name=thread.agent_name,
        initiator=initiator,
        identity=identity,
        client_data=client_data,
        **run_metadata_defaults(agent),
    )


def dispatch_after_commit(run_id: str) -> None:
    transaction.on_commit(lambda: get_executor().dispatch(run_id))


def lock_thread(thread_id: str) -> None:
    """Lock the thread row until commit: what serializes sends with the end of a run.

    Every transaction that decides "a run is active, queue the input" (a send) or "the run
    ends, admit the next input" (the end of a run, a cancel) takes this lock first, before the
    run row: otherwise a send could queue its input after the ending transaction looked for
    queued input and before it committed, leaving that input with no run to admit it. One
    order everywhere (thread, then run) keeps the two from deadlocking.

    A database without row locks (SQLite) serializes every write transaction instead, and
    there the SELECT would lock nothing: it is not sent.
    """
    if connection.features.has_select_for_update:
        with prepared_cursor() as cursor:
            cursor.execute(_lock_sql(connection.vendor), [thread_id])


@cache
def _lock_sql(vendor: str) -> str:
    table = qn(Thread._meta.db_table)
    sql = f"SELECT {table}.{qn('id')} FROM {table} WHERE {table}.{qn('id')} = %s"  # noqa: S608
    return f"{sql} {connection.ops.for_update_sql()}"


def admit_next(thread_id: str) -> Run | None:
    """Move the next queued item into the transcript, unchanged, and start its run.

    Interrupting input goes first (it cancelled the run to run next), then the oldest. The
    caller holds the thread lock (:func:`lock_thread`). After commit, subscribers get the
    admitted message (``message.committed``).
    """
    item = (
        QueueItem.objects.filter(thread_id=thread_id, status=QueueItem.Status.QUEUED)
        .order_by(
            Case(When(policy=QueueItem.Policy.INTERRUPT, then=Value(0)), default=Value(1)),
            "created_at",
            "id",
        )
        .first()
    )
    if item is None:
        return None
    agent_name = Thread.objects.values_list("agent_name", flat=True).get(id=thread_id)
    run = Run.objects.create(
        thread_id=thread_id,
        scope_key=item.scope_key,
        agent_name=agent_name,
        initiator=item.message.get("initiator", Run.Initiator.SEND),
        identity=item.identity,
        client_data=item.client_data,
        **run_metadata_defaults(agent_name),
    )
    message = item.message
    row = Message.objects.create(
        message_id=item.message_id,
        thread_id=thread_id,
        scope_key=item.scope_key,
        run=run,
        role="user",
        parts=message["parts"],
        metadata=message.get("metadata") or {},
        producer=Message.Producer.SEND,
        relation=Message.Relation.INPUT,
    )
    QueueItem.objects.filter(pk=item.pk).update(
        status=QueueItem.Status.ADMITTED, run=run, admitted_at=timezone.now()
    )
    # The admitted input joins the transcript: announced once, by the admission (a send
    # announced its own input), before its run can start.
    publish_after_commit(thread_id, [message_committed(thread_id, message_public(row))])
    dispatch_after_commit(run.id)
    return run


def resume_if_answered(run_id: str, *, dispatch: bool = True) -> bool:
    """A waiting run whose last pending action was just answered is queued again (and
    dispatched after commit); True when it was. The caller holds the run's row lock."""
    if PendingAction.objects.filter(run_id=run_id, status=PendingAction.Status.PENDING).exists():
        return False
    resumed = Run.objects.filter(pk=run_id, status=Run.Status.WAITING).update(
        status=Run.Status.QUEUED
    )
    if resumed and dispatch:
        dispatch_after_commit(run_id)
    return bool(resumed)
