"""The ORM implementation of the engine's :class:`ThreadStore`.

Each method is one short synchronous transaction, called from the engine through
``sync_to_async``. Fencing: a write transaction starts with a conditional UPDATE of the run
row on the lease predicate (:func:`pai_threads.store.sql.lease_held`); zero rows means the
lease is gone and the transaction raises :class:`LeaseLost` before writing anything. The
UPDATE also locks the run row until commit, so a concurrent claim (which bumps the token)
waits for us.

The statements are in :mod:`pai_threads.store.fenced_writes` (the hot path's budget there).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import timedelta
from typing import Any, NoReturn, cast

from django.db import connection, transaction
from django.utils import timezone

from pai_agents.engine.store import (
    ActionRequest,
    ClaimedRun,
    Lease,
    LeaseLost,
    RunNotFound,
    RunOutcome,
    RunSignals,
    StepRecord,
)
from pai_agents.json import ensure_strict_json
from pai_agents.lifecycle.suspensions import SuspensionEpisode
from pai_agents.messages.types import UIMessage
from pai_agents.models.base import Usage
from pai_threads.conf import pai_settings
from pai_threads.models import Message, PendingAction, QueueItem
from pai_threads.store.admission import lock_thread
from pai_threads.store.checkpoints import (
    checkpoint_by_orm,
    checkpoint_parts,
    checkpoint_statement,
    checkpoint_sync,
    checkpointed,
    open_conflicts,
)
from pai_threads.store.claims import claim_returning, claimed_run, lease_of
from pai_threads.store.context_reads import context_messages, messages_of_context_json
from pai_threads.store.db import run_db as _db
from pai_threads.store.fenced_writes import (
    Fenced,
    after_end,
    before_end,
    fence_returning,
    message_key,
    message_of,
    outcome_changes,
    parts_statement,
    parts_written,
    run_column,
    stored_parts,
    update_parts,
)
from pai_threads.store.lifecycle_backend import ORMLifecycleThread, ORMRunMetadata
from pai_threads.store.loop_connections import loop_connections
from pai_threads.store.prepared import prepared_cursor
from pai_threads.store.run_facts import RunFacts
from pai_threads.store.sql import (
    fence,
    fenced_update_sql,
    held_runs,
    queued_sql,
)
from pai_threads.store.step_writes import (
    acommit_new_step,
    acommit_replacing,
    commit_new_step,
    commit_replacing,
    step_rows,
)
from pai_threads.store.suspensions import action_request, suspend_history_of
from pai_threads.subagents import child_progressed, start_children

__all__ = ["ORMThreadStore"]


def _checkpoint_by_orm(lease: Lease, message: UIMessage, step_index: int, parts: Any) -> None:
    with open_conflicts(message):
        checkpoint_by_orm(lease, message, step_index, parts)


def _missing(lease: Lease, message: UIMessage) -> NoReturn:
    """A self-fencing update matched no row: the lease is lost, or the message unknown."""
    if not held_runs(lease).exists():
        raise LeaseLost(lease.run_id)
    raise LookupError(f"run {lease.run_id} has no message {message['id']}")


class ORMThreadStore:
    """Persistence for the engine on the Django ORM (SQLite or PostgreSQL).

    One instance serves one execution (or a test's few); :attr:`facts` holds what its
    writes returned, for the execution's realtime publisher.

    ``context_on_claim(agent_name)`` says whether the engine's next store call after the
    claim is :meth:`load_context` (true unless a hook runs in between, which may write the
    thread): then the claim reads the context in the same thread hop, and the first
    ``load_context`` returns it without a hop. Any other call drops it unread.
    """

    def __init__(self, *, context_on_claim: Callable[[str], bool] | None = None) -> None:
        self.facts = RunFacts()
        self._context_on_claim = context_on_claim
        self._claimed_context: dict[str, list[UIMessage]] = {}
        # Step messages this store inserted and never suspended on: no suspension episode
        # can name them, so their projection needs no join query.
        self._unsuspended: set[str] = set()
        # (run, step) whose open message this store inserted or updated (checkpoints).
        self._open_steps: set[tuple[str, int]] = set()

    def _record(self, lease: Lease, fenced: Fenced, *, ends: bool) -> None:
        """After a commit: the run row and the queue as the fencing UPDATE returned them."""
        self.facts.run_written(fenced.run)
        self.facts.queue_observed(lease.run_id, fenced.queued)
        if ends and not fenced.queued and not fenced.pending:
            self.facts.sides_empty(lease.run_id)

    # -- sync implementations (each one transaction) --

    def claim_run_sync(self, run_id: str, *, owner: str, lease_seconds: float) -> ClaimedRun:
        # The context is read with the claim (PostgreSQL), or right after it, when the engine
        # will ask for it first; an agent whose prepare_run hook comes first leaves it unread.
        claimed = claim_returning(
            run_id,
            owner=owner,
            lease_seconds=lease_seconds,
            with_context=self._context_on_claim is not None,
            context_window=pai_settings.CONTEXT_WINDOW_MESSAGES or None,
        )
        if claimed is None:
            raise RunNotFound(run_id)
        run = claimed.run
        self.facts.run_written(run)
        self.facts.queue_observed(run.id, claimed.queued)
        self.facts.inputs_read(run.id, claimed.inputs)
        lease = lease_of(run, owner)
        if self._context_on_claim is not None and self._context_on_claim(run.agent_name):
            self._claimed_context[run.id] = (
                self.load_context_sync(lease)
                if claimed.context is None
                else messages_of_context_json(claimed.context)
            )
        return claimed_run(run, lease)

    def heartbeat_sync(self, lease: Lease, *, lease_seconds: float) -> RunSignals:
        # One statement: the fencing UPDATE returns the cancel request and the queue. The
        # renewal counts from when a connection is in hand (see claim_returning).
        connection.ensure_connection()
        expires = timezone.now() + timedelta(seconds=lease_seconds)
        sql, params = fenced_update_sql(lease, {"lease_expires_at": expires}, renewal=True)
        queued, queued_params = queued_sql(run_column("thread_id"))
        sql += f" RETURNING {run_column('cancel_requested_at')}, {queued}"
        with prepared_cursor() as cursor:
            cursor.execute(sql, [*params, *queued_params])
            row = cursor.fetchone()
        if row is None:
            raise LeaseLost(lease.run_id)
        self.facts.queue_observed(lease.run_id, bool(row[1]))
        return RunSignals(cancel_requested=row[0] is not None)

    def checkpoint_message_sync(self, lease: Lease, *, message: UIMessage, step_index: int) -> None:
        # MF-043: stream only into the thread's tail, folded into the statement's WHERE (one
        # index probe, no extra round trip; see store.checkpoints).
        parts = checkpoint_parts(message)
        step = (lease.run_id, step_index)
        try:
            with open_conflicts(message):
                opened = step in self._open_steps
                queued = checkpoint_sync(lease, message, step_index, parts, opened=opened)
                if queued is None:
                    checkpoint_by_orm(lease, message, step_index, parts)
            self._checkpointed(lease, step, queued)
        finally:
            self.facts.message_changed(message["id"])

    def _checkpointed(self, lease: Lease, step: tuple[str, int], queued: bool | None) -> None:
        self._open_steps.add(step)  # this store's row now: later checkpoints update it
        if queued is not None:
            self.facts.queue_observed(lease.run_id, queued)

    def load_context_sync(self, lease: Lease) -> list[UIMessage]:
        # The newest window of context-visible messages, so a step's cost does not grow
        # with the thread (messages are whole steps: a window never splits a tool call from
        # its result).
        return context_messages(lease.thread_id, pai_settings.CONTEXT_WINDOW_MESSAGES)

    def commit_step_sync(
        self,
        lease: Lease,
        *,
        message: UIMessage,
        step: StepRecord,
        outcome: RunOutcome | None,
        replace_open: bool = False,
    ) -> None:
        rows = step_rows(lease, message, step, outcome)
        if replace_open:
            fenced, row = commit_replacing(lease, rows, outcome)
        else:  # one autocommit statement on PostgreSQL (see step_writes)
            fenced, row = commit_new_step(lease, rows, outcome)
        self._step_stored(lease, fenced, row, ends=rows.ends, replace_open=replace_open)
        if fenced.run.parent_run_id and not rows.ends:
            child_progressed(fenced.run, row.parts)

    def _step_stored(
        self, lease: Lease, fenced: Fenced, row: Message, *, ends: bool, replace_open: bool
    ) -> None:
        if replace_open:
            self.facts.message_written(row, suspensions=True)
        else:
            self._unsuspended.add(row.message_id)
            self.facts.message_written(row, suspensions=False)
        self._record(lease, fenced, ends=ends)

    def update_message_sync(
        self, lease: Lease, *, message: UIMessage, outcome: RunOutcome | None
    ) -> None:
        parts = stored_parts(message)
        fenced: Fenced | None = None
        ends = False
        if outcome is None:
            # No run change: one statement, fenced by a locking EXISTS on the run row.
            updated = update_parts(lease, message_key(lease, message), parts, fenced=True)
            if updated is None:
                _missing(lease, message)
        else:
            with transaction.atomic():
                ends = before_end(lease, outcome)
                fenced = fence_returning(lease, outcome_changes(outcome), sides=ends)
                updated = update_parts(lease, message_key(lease, message), parts, fenced=False)
                if updated is None:
                    raise LookupError(f"run {lease.run_id} has no message {message['id']}")
                if ends:
                    after_end(lease, fenced)
        assert updated is not None  # both branches raise otherwise
        self._message_updated(lease, updated, fenced, ends=ends)

    def _message_updated(
        self, lease: Lease, updated: tuple[Message, bool], fenced: Fenced | None, *, ends: bool
    ) -> None:
        row, queued = updated
        self.facts.message_written(row, suspensions=row.message_id not in self._unsuspended)
        if fenced is None:
            self.facts.queue_observed(lease.run_id, queued)
        else:
            self._record(lease, fenced, ends=ends)

    def suspend_sync(
        self,
        lease: Lease,
        *,
        message: UIMessage,
        actions: Sequence[ActionRequest],
        usage: Usage,
    ) -> None:
        with transaction.atomic():
            changes = outcome_changes(RunOutcome(status="waiting", usage=usage))
            fenced = fence_returning(lease, changes)
            stored = message_of(lease, message).update(
                parts=stored_parts(message), updated_at=timezone.now()
            )
            if not stored:  # no pending action for a message the run does not have
                raise LookupError(f"run {lease.run_id} has no message {message['id']}")
            PendingAction.objects.bulk_create(
                PendingAction(
                    thread_id=lease.thread_id,
                    run_id=lease.run_id,
                    scope_key=lease.scope_key,
                    message_id=message["id"],
                    tool_call_id=action.tool_call_id,
                    tool_name=action.tool_name,
                    kind=action.kind,
                    sequence=action.sequence,
                    input=ensure_strict_json(action.input, what="tool input"),
                    request=action_request(action),
                )
                for action in actions
            )
            start_children(lease, actions)  # sub-agent calls: their child runs, atomically
        self._unsuspended.discard(message["id"])
        self.facts.message_changed(message["id"])
        self._record(lease, fenced, ends=False)
        if fenced.run.parent_run_id:  # a sub-agent waiting on its own actions
            child_progressed(fenced.run, message["parts"])

    def begin_actions_sync(self, lease: Lease, *, tool_call_ids: Sequence[str]) -> None:
        with transaction.atomic():
            fence(lease)
            PendingAction.objects.filter(
                run_id=lease.run_id,
                tool_call_id__in=list(tool_call_ids),
                status=PendingAction.Status.SUBMITTED,
            ).update(status=PendingAction.Status.EXECUTING)

    def suspend_history_sync(
        self, lease: Lease, *, tool_call_ids: Collection[str]
    ) -> dict[str, list[SuspensionEpisode]]:
        return suspend_history_of(lease.run_id, tool_call_ids)

    def take_steering_sync(self, lease: Lease) -> list[UIMessage]:
        # (take_steering skips this call when a write just saw no queued input at all.)
        # One read when there is nothing to take (the usual case): no transaction, no commit.
        head = QueueItem.objects.filter(
            thread_id=lease.thread_id, status=QueueItem.Status.QUEUED
        ).order_by("created_at", "id")
        lead: list[str] = []
        for pk, policy in head.values_list("pk", "policy")[:20]:
            if policy != QueueItem.Policy.STEER:
                break  # earlier input of another policy runs first
            lead.append(pk)
        if not lead:
            return []
        now = timezone.now()
        with transaction.atomic():
            lock_thread(lease.thread_id)
            fence(lease)
            items = list(
                QueueItem.objects.filter(pk__in=lead, status=QueueItem.Status.QUEUED).order_by(
                    "created_at", "id"
                )
            )
            rows = [
                Message.objects.create(
                    message_id=item.message_id,
                    thread_id=lease.thread_id,
                    scope_key=item.scope_key,
                    run_id=lease.run_id,
                    role="user",
                    parts=item.message["parts"],
                    metadata=item.message.get("metadata") or {},
                    producer=Message.Producer.SEND,
                    relation=Message.Relation.INPUT,
                )
                for item in items
            ]
            QueueItem.objects.filter(pk__in=[i.pk for i in items]).update(
                status=QueueItem.Status.ADMITTED, run_id=lease.run_id, admitted_at=now
            )
        return [cast(UIMessage, row.to_ui_message()) for row in rows]

    def finish_run_sync(
        self, lease: Lease, outcome: RunOutcome, *, discard_open_step: int | None = None
    ) -> None:
        with transaction.atomic():
            ends = before_end(lease, outcome)
            fenced = fence_returning(lease, outcome_changes(outcome), sides=ends)
            if discard_open_step is not None:
                Message.objects.filter(
                    run_id=lease.run_id, step_index=discard_open_step, status=Message.Status.OPEN
                ).delete()
            if ends:
                after_end(lease, fenced)
        self._record(lease, fenced, ends=ends)

    # -- the async protocol --

    def _drop_claimed_context(self, lease: Lease) -> None:
        """Another call came first: the context read with the claim may be stale now."""
        self._claimed_context.pop(lease.run_id, None)

    async def claim_run(self, run_id: str, *, owner: str, lease_seconds: float) -> ClaimedRun:
        return await _db(self.claim_run_sync, run_id, owner=owner, lease_seconds=lease_seconds)

    async def heartbeat(self, lease: Lease, *, lease_seconds: float) -> RunSignals:
        return await _db(self.heartbeat_sync, lease, lease_seconds=lease_seconds)

    async def checkpoint_message(
        self, lease: Lease, *, message: UIMessage, step_index: int
    ) -> None:
        self._drop_claimed_context(lease)
        conns = loop_connections()
        if conns is None:
            await _db(self.checkpoint_message_sync, lease, message=message, step_index=step_index)
            return
        # PostgreSQL: the one statement from this loop; the ORM's slow path on a store thread.
        parts = checkpoint_parts(message)
        step = (lease.run_id, step_index)
        try:
            with open_conflicts(message):
                sql, params = checkpoint_statement(
                    lease, message, step_index, parts, opened=step in self._open_steps
                )
                queued = checkpointed(await conns.fetchone(sql, params))
            if queued is None:
                await _db(_checkpoint_by_orm, lease, message, step_index, parts)
            self._checkpointed(lease, step, queued)
        finally:
            self.facts.message_changed(message["id"])

    async def suspend(
        self, lease: Lease, *, message: UIMessage, actions: Sequence[ActionRequest], usage: Usage
    ) -> None:
        self._drop_claimed_context(lease)
        await _db(self.suspend_sync, lease, message=message, actions=actions, usage=usage)

    async def begin_actions(self, lease: Lease, *, tool_call_ids: Sequence[str]) -> None:
        self._drop_claimed_context(lease)
        await _db(self.begin_actions_sync, lease, tool_call_ids=tool_call_ids)

    async def load_context(self, lease: Lease) -> list[UIMessage]:
        claimed = self._claimed_context.pop(lease.run_id, None)
        if claimed is not None:
            return claimed
        return await _db(self.load_context_sync, lease)

    async def suspend_history(
        self, lease: Lease, *, tool_call_ids: Collection[str]
    ) -> dict[str, list[SuspensionEpisode]]:
        self._drop_claimed_context(lease)
        return await _db(self.suspend_history_sync, lease, tool_call_ids=tool_call_ids)

    async def commit_step(
        self,
        lease: Lease,
        *,
        message: UIMessage,
        step: StepRecord,
        outcome: RunOutcome | None = None,
        replace_open: bool = False,
    ) -> None:
        self._drop_claimed_context(lease)
        conns = loop_connections()
        if conns is None:
            await _db(
                self.commit_step_sync,
                lease,
                message=message,
                step=step,
                outcome=outcome,
                replace_open=replace_open,
            )
            return
        # PostgreSQL: one statement, sent from this loop (no store thread; see step_writes).
        rows = step_rows(lease, message, step, outcome)
        commit = acommit_replacing if replace_open else acommit_new_step
        fenced, row = await commit(conns, lease, rows, outcome)
        self._step_stored(lease, fenced, row, ends=rows.ends, replace_open=replace_open)
        if fenced.run.parent_run_id and not rows.ends:
            await _db(child_progressed, fenced.run, row.parts)

    async def update_message(
        self, lease: Lease, *, message: UIMessage, outcome: RunOutcome | None = None
    ) -> None:
        self._drop_claimed_context(lease)
        conns = loop_connections() if outcome is None else None
        if conns is None:
            await _db(self.update_message_sync, lease, message=message, outcome=outcome)
            return
        # PostgreSQL, no run change: one self-fencing statement, sent from this loop.
        sql, params = parts_statement(
            lease, message_key(lease, message), stored_parts(message), fenced=True
        )
        updated = parts_written(await conns.fetchone(sql, params))
        if updated is None:
            await _db(_missing, lease, message)
        else:
            self._message_updated(lease, updated, None, ends=False)

    async def take_steering(self, lease: Lease) -> list[UIMessage]:
        self._drop_claimed_context(lease)
        if self.facts.queue_empty(lease.run_id):
            # A write of this execution just saw no queued input: nothing to take, no hop.
            return []
        return await _db(self.take_steering_sync, lease)

    async def finish_run(
        self, lease: Lease, outcome: RunOutcome, *, discard_open_step: int | None = None
    ) -> None:
        self._drop_claimed_context(lease)
        await _db(self.finish_run_sync, lease, outcome, discard_open_step=discard_open_step)

    # -- the lifecycle facade (pai_agents.engine.facades.LifecycleStore); no I/O until used --

    def lifecycle_thread(self, lease: Lease, *, resolver: bool = False, schemas: Any = None) -> Any:
        return ORMLifecycleThread(lease, resolver=resolver, schemas=schemas)

    def lifecycle_run_metadata(self, lease: Lease, *, schemas: Any = None) -> tuple[Any, Any]:
        run = schemas.run if schemas is not None else None
        return ORMRunMetadata(lease, "private", run), ORMRunMetadata(lease, "public", run)
