"""A claimed run as the engine receives it: the lease, and what an earlier episode left.

:func:`~pai_threads.store.fenced_writes.claim_returning` claims in one statement; a first
claim needs nothing else. A resume or a recovery also reads the run's latest step message
and its executing tool calls (at-most-once tools), two reads only those claims pay.
"""

from __future__ import annotations

from typing import cast

from pai_agents.engine.store import ClaimedRun, Lease
from pai_agents.messages.types import MessageRole, UIMessage
from pai_threads.models import Message, PendingAction, Run

__all__ = ["claimed_run", "lease_of"]


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
