"""Cancelling a run: at once when queued or waiting, through its abort signal when running."""

from __future__ import annotations

from functools import partial

from django.db import transaction
from django.utils import timezone

from pai_agents.engine.cancelled import (
    cancelled_run_finished,
    observes_run_finished,
    observes_tool_results,
)
from pai_agents.engine.rewrites import dispatcher
from pai_agents.engine.tool_calls import open_tool_parts, settle_chunk
from pai_agents.messages.types import UIMessage
from pai_threads.errors import NotFound
from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import run_and_side_state
from pai_threads.execution import cancellation, registry
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Run
from pai_threads.observability import signals
from pai_threads.services.input_guard import lookup_id
from pai_threads.store.admission import admit_next, dispatch_after_commit, lock_thread
from pai_threads.store.rows import fold_chunks
from pai_threads.subagents import answer_parent

__all__ = ["cancel_locked", "cancel_run"]


def cancel_run(identity: Identity, run_id: str) -> Run:
    """Cancel a run: at once when queued or waiting, through its abort signal when running.

    Cancelling a waiting run cancels its pending actions and settles their tool calls; the
    thread's next queued input is admitted when the run ends. After commit, subscribers get
    the run's status, the queue and the actions.
    """
    thread_id = (
        Run.objects.filter(id=lookup_id(run_id, "run"), scope_key=identity.scope_key)
        .values_list("thread_id", flat=True)
        .first()
    )
    if thread_id is None:
        raise NotFound("run not found")
    with transaction.atomic():
        # The thread first, then the run: the lock order of sends and of a run's end.
        lock_thread(thread_id)
        run = Run.objects.select_for_update().filter(id=run_id).first()
        if run is None:
            raise NotFound("run not found")  # its thread was deleted meanwhile
        # A running run reports its own end; a queued or waiting one stopped right here.
        # Registered before cancel_locked's abort of a run executing in this process
        # (on_commit callbacks run in order): the run's state is read and numbered before
        # the run can end, never after its own end event (a stale "running" numbered last
        # left every client showing the cancelled run running).
        publish_after_commit(thread_id, partial(run_and_side_state, thread_id, run.id))
        cancel_locked(run)
    run.refresh_from_db()
    return run


def cancel_locked(run: Run) -> None:
    now = timezone.now()
    if run.status == Run.Status.RUNNING:
        Run.objects.filter(pk=run.pk, cancel_requested_at__isnull=True).update(
            cancel_requested_at=now
        )
        transaction.on_commit(lambda: cancellation.abort_local(run.id))
        return
    if run.status not in (Run.Status.QUEUED, Run.Status.WAITING):
        return
    if run.status == Run.Status.QUEUED and run.cancel_requested_at is not None:
        return  # already being cancelled: its episode settles and ends it (LC-137)
    waiting = run.status == Run.Status.WAITING
    message = None
    if waiting:
        _cancel_children_after_commit(run)
        PendingAction.objects.filter(run=run, status=PendingAction.Status.PENDING).update(
            status=PendingAction.Status.CANCELLED, resolved_at=now
        )
        row = _waiting_row(run)
        if row is not None and _settles_in_episode(run, row):
            # LC-137: the cancel results pass after_tool_result in a short episode, which
            # stores and streams them and ends the run cancelled (then admits the queue).
            Run.objects.filter(pk=run.pk).update(
                status=Run.Status.QUEUED,
                cancel_requested_at=now,
                lease_owner="",
                lease_expires_at=None,
            )
            dispatch_after_commit(run.id)
            return
        message = _settle_waiting_message(row) if row is not None else None
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.CANCELLED, finished_at=now, lease_owner="", lease_expires_at=None
    )
    admit_next(run.thread_id)
    if run.parent_run_id:  # a sub-agent run: the parent's call gets "cancelled"
        answer_parent(run.id)
    _run_finished_after_commit(run, message, continuation=waiting)
    signals.send_after_commit(signals.run_finished, **signals.run_ids(run), status="cancelled")


def _cancel_children_after_commit(run: Run) -> None:
    """Cancelling a parent that waits on sub-agent calls cancels their child runs, each in a
    transaction of its own after this one commits (the child's locks are never taken while
    the parent's are held: a child ending at the same moment locks child, then parent)."""
    children = list(
        Run.objects.filter(parent_run=run, status__in=Run.ACTIVE).values_list("id", "thread_id")
    )

    def cancel_children() -> None:
        for child in children:
            _cancel_child(*child)

    if children:
        transaction.on_commit(cancel_children)


def _cancel_child(run_id: str, thread_id: str) -> None:
    with transaction.atomic():
        lock_thread(thread_id)
        child = Run.objects.select_for_update().filter(id=run_id).first()
        if child is None:
            return
        cancel_locked(child)
        publish_after_commit(thread_id, partial(run_and_side_state, thread_id, child.id))


def _waiting_row(run: Run) -> Message | None:
    """The waiting run's last step message (the one with the unanswered calls)."""
    return Message.objects.filter(run=run, step_index__isnull=False).order_by("-step_index").first()


def _settles_in_episode(run: Run, row: Message) -> bool:
    """Open tool calls whose agent overrides after_tool_result (LC-137)."""
    try:
        agent = registry.get_agent(run.agent_name)
    except LookupError:
        return False  # an agent no longer registered: nothing can run its hooks
    message = UIMessage(id=row.message_id, role="assistant", parts=row.parts)
    return observes_tool_results(agent) and next(iter(open_tool_parts(message)), None) is not None


def _run_finished_after_commit(run: Run, message: UIMessage | None, *, continuation: bool) -> None:
    """TH-041: no episode ends a queued or waiting run cancelled here, so the agent's
    run_finished observer is handed to the post-commit dispatcher."""
    try:
        agent = registry.get_agent(run.agent_name)
    except LookupError:
        return  # an agent no longer registered: nothing observes the run
    if not observes_run_finished(agent):
        return
    job = cancelled_run_finished(
        agent,
        run_id=run.id,
        thread_id=run.thread_id,
        identity=dict(run.identity),
        client_data=dict(run.client_data),
        message=message,
        continuation=continuation,
    )
    transaction.on_commit(lambda: dispatcher().submit(run.thread_id, job))


def _settle_waiting_message(row: Message) -> UIMessage:
    """A cancelled waiting run leaves no unanswered tool call behind (transcript integrity);
    returns the settled message."""
    stored = UIMessage(id=row.message_id, role="assistant", parts=row.parts)
    settled = [settle_chunk(part["toolCallId"], "cancel") for part in open_tool_parts(stored)]
    parts = fold_chunks(row, settled)
    return UIMessage(id=row.message_id, role="assistant", parts=parts, metadata=row.metadata)
