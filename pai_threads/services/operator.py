"""Operator actions across scopes: what the admin console calls, never row edits.

An operator (a staff user) acts on any partition. The :class:`Identity` for the runtime
call is built here, by trusted server code, from the row acted on: its ``scope_key``, and
the identity data the server itself stored on the thread's latest run (the owner's trusted
identity as last resolved), never anything a client sent. Each function is the same
service the API calls, so hooks fire and live clients get the events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from pai_threads.errors import ActionConflict, NotFound, ThreadBusy
from pai_threads.executors import get_executor
from pai_threads.identity import Identity
from pai_threads.models import PendingAction, Run, Thread
from pai_threads.services.actions import fulfil_action
from pai_threads.services.cancelling import cancel_run
from pai_threads.services.input_guard import lookup_id
from pai_threads.services.threads import delete_thread
from pai_threads.store.attempts import record_lost_leases
from pai_threads.store.sql import lease_expired

__all__ = [
    "Operator",
    "answer_as_operator",
    "delete_as_operator",
    "operator_identity",
    "recover_run",
]

_ENDED = (Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED)


@dataclass(frozen=True, kw_only=True)
class Operator:
    """The staff user behind an action, as the server knows them (never client data)."""

    user_id: str
    username: str

    @property
    def label(self) -> str:
        """Recorded as the answer's submitter: ``{"manual": "operator:<username>#<id>"}``."""
        return f"operator:{self.username}#{self.user_id}"


def operator_identity(thread: Thread) -> Identity:
    """The identity an operator acts with on ``thread``: its partition, and the identity data
    the server stored on the thread's latest run (``{}`` for a thread without runs)."""
    latest = Run.objects.filter(thread=thread).order_by("-created_at", "-id").first()
    data: Mapping[str, Any] = dict(latest.identity) if latest and latest.identity else {}
    return Identity(scope_key=thread.scope_key, data=data)


def answer_as_operator(
    operator: Operator,
    action_id: str,
    response: Mapping[str, Any],
    *,
    thread_id: str | None = None,
    dispatch: bool = True,
) -> PendingAction:
    """Approve, deny or fulfil a pending action as an operator (validated like the API).

    ``thread_id`` binds the answer to the thread the operator looked at: an action of
    another thread is NotFound. An action already answered, or whose run has ended, is an
    ActionConflict; otherwise the run resumes as after a client's answer."""
    actions = PendingAction.objects.filter(id=lookup_id(action_id, "pending action"))
    if thread_id is not None:
        actions = actions.filter(thread_id=thread_id)
    action = actions.select_related("run").first()
    if action is None:
        raise NotFound("pending action not found on this thread")
    if action.status != PendingAction.Status.PENDING:
        raise ActionConflict(f"this action was already {action.status}: nothing to answer")
    if action.run.status in _ENDED:
        raise ActionConflict(f"the run has ended ({action.run.status}): nothing waits for it")
    return fulfil_action(action.id, response, by=operator.label, dispatch=dispatch)


def recover_run(run_id: str) -> str:
    """Re-dispatch one run nobody executes, as the sweeper does (its expired attempt is
    recorded ``lease_lost``). Returns why it was refused, or ``""`` when dispatched."""
    run = Run.objects.filter(id=lookup_id(run_id, "run")).first()
    if run is None:
        raise NotFound("run not found")
    now = timezone.now()
    if run.status in _ENDED:
        return f"the run has ended ({run.status})"
    if run.status == Run.Status.WAITING:
        return "the run waits for its pending actions: answer or cancel them"
    stalled = Run.objects.filter(lease_expired(now), id=run.id).exists()
    if run.status == Run.Status.RUNNING and not stalled:
        return "a worker holds the run's lease: it is executing"
    record_lost_leases([run.id], now)
    get_executor().dispatch(run.id)
    return ""


def delete_as_operator(thread: Thread) -> list[str]:
    """Delete a thread, its active runs cancelled first (clients see them end, their
    ``run_finished`` observers run); returns the ids of the runs cancelled.

    A run that does not end at once (a running one stops at its worker's next check; a
    waiting one may settle its tool calls in a short episode) is ThreadBusy: nothing is
    deleted under a run still executing, and the operator deletes again once it ended."""
    identity = Identity(scope_key=thread.scope_key)
    active = list(Run.objects.active().filter(thread=thread).values_list("id", flat=True))
    for run_id in active:
        try:
            cancel_run(identity, run_id)
        except NotFound:
            continue  # ended and gone meanwhile
    stopping = list(Run.objects.active().filter(thread=thread).values_list("id", flat=True))
    if stopping:
        raise ThreadBusy(
            f"run(s) {', '.join(stopping)} were asked to cancel and are still stopping:"
            " delete the thread once they have ended"
        )
    delete_thread(identity, thread.id)
    return active
