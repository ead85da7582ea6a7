"""Admission of queued input: when a thread's run ends, its next queued message starts.

Called inside the transaction that ends the run, so "run ended" and "next run exists" are
one fact: there is never a moment with queued input and no run to drain it.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from pai_threads.models import Message, QueueItem, Run, Thread

__all__ = ["admit_next", "dispatch_after_commit"]


def dispatch_after_commit(run_id: str) -> None:
    def dispatch() -> None:
        from pai_threads.executors import get_executor

        get_executor().dispatch(run_id)

    transaction.on_commit(dispatch)


def admit_next(thread_id: str) -> Run | None:
    """Move the oldest queued item into the transcript, unchanged, and start its run."""
    item = (
        QueueItem.objects.filter(thread_id=thread_id, status=QueueItem.Status.QUEUED)
        .order_by("created_at", "id")
        .first()
    )
    if item is None:
        return None
    run = Run.objects.create(
        thread_id=thread_id,
        scope_key=item.scope_key,
        agent_name=Thread.objects.values_list("agent_name", flat=True).get(id=thread_id),
        identity=item.identity,
        client_data=item.client_data,
    )
    message = item.message
    Message.objects.create(
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
    dispatch_after_commit(run.id)
    return run
