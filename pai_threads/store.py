"""The ORM implementation of the engine's :class:`ThreadStore`.

Each method is one short synchronous transaction, called from the engine through
``sync_to_async``. Fencing: a write transaction starts with a conditional UPDATE of the run
row on the lease predicate (:func:`pai_threads.store_sql.lease_held`); zero rows means the
lease is gone and the transaction raises :class:`LeaseLost` before writing anything. The
UPDATE also locks the run row until commit, so a concurrent claim (which bumps the token)
waits for us.

The hot path (claim, step commits, tool results; docs/benchmarks.md W1) spends as few
statements as the guarantees allow: writes return what they wrote (``RETURNING``) into the
store's :class:`RunFacts` for the realtime publisher, the fencing UPDATE also reports the
thread's queue (so an empty queue costs no steer check and no admission query), a message
update without a run change is one statement fenced by a locking ``EXISTS`` on the run row,
and on PostgreSQL a step commit is one data-modifying CTE (fence, message, Step row).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, F, OuterRef, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from pai_agents.engine.store import (
    TERMINAL_STATUSES,
    ActionRequest,
    ClaimedRun,
    Lease,
    LeaseLost,
    OpenMessageConflict,
    RunNotFound,
    RunOutcome,
    RunSignals,
    StepRecord,
    step_diagnostics,
)
from pai_agents.json import ensure_strict_json
from pai_agents.lifecycle.suspensions import SuspensionEpisode
from pai_agents.messages.parts import check_part_types
from pai_agents.messages.types import MessageRole, UIMessage
from pai_agents.models.base import Usage
from pai_threads.conf import pai_settings
from pai_threads.db import run_db as _db
from pai_threads.models import Message, PendingAction, QueueItem, Run, Step
from pai_threads.queueing import admit_next, lock_thread
from pai_threads.run_facts import RunFacts
from pai_threads.store_sql import (
    MESSAGE_COLUMNS,
    convert,
    fence,
    held_exists_sql,
    held_runs,
    input_messages,
    input_messages_sql,
    insert_sql,
    lease_expired,
    model_fields,
    pending_sql,
    qn,
    queued_sql,
    returning_sql,
    update_sql,
)
from pai_threads.suspensions import suspension_episode

__all__ = ["ORMThreadStore"]


_RUN_TABLE = Run._meta.db_table
# What a client projection of a run needs (run_public), returned by every fencing write.
_RUN_FIELDS = model_fields(
    Run,
    (
        "id",
        "thread_id",
        "status",
        "initiator",
        "step_count",
        "attempt",
        "usage",
        "metadata",
        "created_at",
        "started_at",
        "finished_at",
    ),
)
_CLAIM_FIELDS = _RUN_FIELDS + model_fields(
    Run, ("agent_name", "scope_key", "identity", "client_data", "lease_token")
)
_MESSAGE_FIELDS = model_fields(Message, MESSAGE_COLUMNS)


@dataclass(frozen=True)
class _Fenced:
    """What a fencing UPDATE returned: the run row after it, and the thread's side state
    as the transaction sees it (``pending`` is only asked for when a run ends)."""

    run: Run
    queued: bool
    pending: bool


def _run_column(name: str) -> str:
    return f"{qn(_RUN_TABLE)}.{qn(name)}"


def _fence_sql(lease: Lease, changes: dict[str, Any], *, sides: bool) -> tuple[str, list[Any]]:
    """The fencing UPDATE, returning the run, ``EXISTS`` queued input [, pending actions].

    In the transaction that ends a run the thread lock is taken by an earlier statement, so
    this statement's snapshot already holds every queued input a send could have added.
    """
    sql, params = update_sql(held_runs(lease), changes or {"lease_token": F("lease_token")})
    queued, queued_params = queued_sql(_run_column("thread_id"))
    columns = [returning_sql(_RUN_FIELDS, _RUN_TABLE), queued]
    params += queued_params
    if sides:
        pending, pending_params = pending_sql(_run_column("thread_id"))
        columns.append(pending)
        params += pending_params
    return f"{sql} RETURNING {', '.join(columns)}", params


def _fenced_row(row: Sequence[Any], *, sides: bool) -> _Fenced:
    width = len(_RUN_FIELDS)
    return _Fenced(
        run=Run(**convert(_RUN_FIELDS, row[:width])),
        queued=bool(row[width]),
        pending=bool(row[width + 1]) if sides else True,
    )


def _fence_returning(
    lease: Lease, changes: dict[str, Any] | None = None, *, sides: bool = False
) -> _Fenced:
    """:func:`fence` that also returns the run row and the thread's side state."""
    sql, params = _fence_sql(lease, changes or {}, sides=sides)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise LeaseLost(lease.run_id)
    return _fenced_row(row, sides=sides)


def _message_row(values: Sequence[Any]) -> Message:
    return Message(**convert(_MESSAGE_FIELDS, values))


def _write_step(
    lease: Lease, changes: dict[str, Any], message: Message, step: Step, *, sides: bool
) -> tuple[_Fenced, Message]:
    """Fence the run (applying ``changes``), insert the step's message and Step row.

    On PostgreSQL this is one statement (a data-modifying CTE: the inserts select from the
    fencing UPDATE, so a lost lease inserts nothing), atomic on its own; elsewhere three
    statements in the caller's transaction.
    """
    if connection.vendor == "postgresql":
        fencing, params = _fence_sql(lease, changes, sides=sides)
        insert, insert_params = insert_sql(message, source="pai_fence", returning=_MESSAGE_FIELDS)
        step_insert, step_params = insert_sql(
            step, source="pai_message", columns={"message_id": f"pai_message.{qn('id')}"}
        )
        sql = (
            f"WITH pai_fence AS ({fencing}), pai_message AS ({insert}), "  # noqa: S608
            f"pai_step AS ({step_insert}) SELECT * FROM pai_fence, pai_message"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, *insert_params, *step_params])
            row = cursor.fetchone()
        if row is None:
            raise LeaseLost(lease.run_id)
        width = len(_RUN_FIELDS) + (2 if sides else 1)
        return _fenced_row(row[:width], sides=sides), _message_row(row[width:])
    fenced = _fence_returning(lease, changes, sides=sides)
    insert, insert_params = insert_sql(message, returning=_MESSAGE_FIELDS)
    with connection.cursor() as cursor:
        cursor.execute(insert, insert_params)
        stored = _message_row(cursor.fetchone())
    step.message_id = stored.pk
    step.save(force_insert=True)
    return fenced, stored


def _update_parts(
    lease: Lease, rows: Any, parts: Any, *, fenced: bool
) -> tuple[Message, bool] | None:
    """UPDATE the parts of ``rows`` (one message), returning the row and ``EXISTS`` queued
    input; None when nothing matched.

    ``fenced``: the statement fences itself with a locking ``EXISTS`` on the run row (the
    lock a fencing UPDATE takes, released at the statement's commit), so a message update
    without a run change is one autocommit statement.
    """
    sql, params = update_sql(rows, {"parts": parts, "updated_at": timezone.now()})
    if fenced:
        held, held_params = held_exists_sql(lease)
        sql += f" AND {held}"
        params += held_params
    queued, queued_params = queued_sql(f"{qn(Message._meta.db_table)}.{qn('thread_id')}")
    sql += f" RETURNING {returning_sql(_MESSAGE_FIELDS, Message._meta.db_table)}, {queued}"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *queued_params])
        row = cursor.fetchone()
    if row is None:
        return None
    return _message_row(row[:-1]), bool(row[-1])


def _message_of(lease: Lease, message: UIMessage) -> Any:
    return Message.objects.filter(run_id=lease.run_id, message_id=message["id"])


def _claim_returning(
    run_id: str, *, owner: str, lease_seconds: float
) -> tuple[Run, bool, list[Message]] | None:
    """Claim in one statement: a conditional UPDATE ... RETURNING, in autocommit.

    The WHERE clause is the whole claim rule (queued, or running with an expired lease); the
    token increment is the fence every later write of this execution checks. It returns the
    run, whether the thread has queued input (the first steer check), and the run's input
    messages (announced to subscribers at once): one round trip instead of three.
    """
    now = timezone.now()
    claimable = Run.objects.filter(Q(status=Run.Status.QUEUED) | lease_expired(now), id=run_id)
    changes = {
        "status": Run.Status.RUNNING,
        "lease_owner": owner,
        "lease_expires_at": now + timedelta(seconds=lease_seconds),
        "lease_token": F("lease_token") + 1,
        "attempt": F("attempt") + 1,
        "started_at": Coalesce(F("started_at"), Value(now)),
    }
    sql, params = update_sql(claimable, changes)
    queued, queued_params = queued_sql(_run_column("thread_id"))
    inputs, inputs_params = input_messages_sql(_run_column("id"))
    sql += f" RETURNING {returning_sql(_CLAIM_FIELDS, _RUN_TABLE)}, {queued}, {inputs}"
    params += [*queued_params, *inputs_params]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    width = len(_CLAIM_FIELDS)
    run = Run(**convert(_CLAIM_FIELDS, row[:width]))
    return run, bool(row[width]), input_messages(row[width + 1])


def _output_message(lease: Lease, message: UIMessage, step_index: int) -> dict[str, Any]:
    return {
        "message_id": message["id"],
        "thread_id": lease.thread_id,
        "scope_key": lease.scope_key,
        "run_id": lease.run_id,
        "role": message["role"],
        "parts": _stored_parts(message),
        "producer": Message.Producer.MODEL,
        "relation": Message.Relation.OUTPUT,
        "step_index": step_index,
    }


def _stored_parts(message: UIMessage) -> Any:
    """A step message's parts as stored: the pinned AI SDK grammar (MF-045, raising
    ``UnknownPartType``) and strict JSON."""
    check_part_types(message["parts"], what=f"message {message['id']}")
    return ensure_strict_json(message["parts"], what="message parts")


def _before_end(lease: Lease, outcome: RunOutcome | None) -> bool:
    """First in a transaction that may end the run: take the thread lock (see lock_thread).
    True when the run ends (then the thread's queue and pending actions are asked for)."""
    ends = outcome is not None and outcome.status in TERMINAL_STATUSES
    if ends:
        lock_thread(lease.thread_id)
    return ends


def _after_end(lease: Lease, fenced: _Fenced) -> None:
    """Inside the ending transaction: the next queued input starts once the run ends (the
    fencing UPDATE saw the queue after the thread lock: nothing queued, nothing to admit)."""
    if fenced.queued:
        admit_next(lease.thread_id)


def _outcome_changes(outcome: RunOutcome) -> dict[str, Any]:
    changes: dict[str, Any] = {
        "status": outcome.status,
        "usage": ensure_strict_json(dict(outcome.usage), what="usage"),
        "error": dict(outcome.error) if outcome.error else None,
    }
    if outcome.status in TERMINAL_STATUSES or outcome.status == Run.Status.WAITING:
        changes.update(lease_owner="", lease_expires_at=None)
    if outcome.status in TERMINAL_STATUSES:
        changes["finished_at"] = timezone.now()
    return changes


class ORMThreadStore:
    """Persistence for the engine on the Django ORM (SQLite or PostgreSQL).

    One instance serves one execution (or a test's few); :attr:`facts` holds what its
    writes returned, for the execution's realtime publisher.
    """

    def __init__(self) -> None:
        self.facts = RunFacts()
        # Step messages this store inserted and never suspended on: no suspension episode
        # can name them, so their projection needs no join query.
        self._unsuspended: set[str] = set()
        # (run, step) whose open message this store inserted or updated (checkpoints).
        self._open_steps: set[tuple[str, int]] = set()

    def _record(self, lease: Lease, fenced: _Fenced, *, ends: bool) -> None:
        """After a commit: the run row and the queue as the fencing UPDATE returned them."""
        self.facts.run_written(fenced.run)
        self.facts.queue_observed(lease.run_id, fenced.queued)
        if ends and not fenced.queued and not fenced.pending:
            self.facts.sides_empty(lease.run_id)

    # -- sync implementations (each one transaction) --

    def claim_run_sync(self, run_id: str, *, owner: str, lease_seconds: float) -> ClaimedRun:
        claimed = _claim_returning(run_id, owner=owner, lease_seconds=lease_seconds)
        if claimed is None:
            raise RunNotFound(run_id)
        run, queued, inputs = claimed
        self.facts.run_written(run)
        self.facts.queue_observed(run.id, queued)
        self.facts.inputs_read(run.id, inputs)
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
            lease=Lease(
                run_id=run.id,
                owner=owner,
                token=run.lease_token,
                thread_id=run.thread_id,
                scope_key=run.scope_key,
            ),
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
        )

    def heartbeat_sync(self, lease: Lease, *, lease_seconds: float) -> RunSignals:
        # One statement: the fencing UPDATE returns the cancel request and the queue.
        expires = timezone.now() + timedelta(seconds=lease_seconds)
        sql, params = update_sql(held_runs(lease), {"lease_expires_at": expires})
        queued, queued_params = queued_sql(_run_column("thread_id"))
        sql += f" RETURNING {_run_column('cancel_requested_at')}, {queued}"
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, *queued_params])
            row = cursor.fetchone()
        if row is None:
            raise LeaseLost(lease.run_id)
        self.facts.queue_observed(lease.run_id, bool(row[1]))
        return RunSignals(cancel_requested=row[0] is not None)

    def checkpoint_message_sync(self, lease: Lease, *, message: UIMessage, step_index: int) -> None:
        parts = _stored_parts(message)
        if message["role"] != "assistant":
            raise OpenMessageConflict("only an assistant message can be open (MF-043)")
        # MF-043: stream only into the thread's tail, folded into the UPDATE's WHERE (one
        # index probe, no extra round trip); a message after it makes the UPDATE match
        # nothing, and the INSERT then meets the one-open-message index.
        later = Message.objects.filter(thread_id=lease.thread_id, pk__gt=OuterRef("pk"))
        rows = Message.objects.filter(
            run_id=lease.run_id, step_index=step_index, status=Message.Status.OPEN
        ).filter(~Exists(later))
        step = (lease.run_id, step_index)
        try:
            if step in self._open_steps:
                # This store opened the row: one self-fencing statement updates it.
                updated = _update_parts(lease, rows, parts, fenced=True)
                if updated is not None:
                    self.facts.queue_observed(lease.run_id, updated[1])
                    return
            with transaction.atomic():
                fence(lease)
                if not rows.update(parts=parts, updated_at=timezone.now()):
                    Message.objects.create(
                        **_output_message(lease, message, step_index),
                        status=Message.Status.OPEN,
                    )
            self._open_steps.add(step)
        except IntegrityError as exc:
            raise OpenMessageConflict(
                f"message {message['id']} cannot be open: another message of the thread is "
                "open, or it is not the thread's tail (MF-043)"
            ) from exc
        finally:
            self.facts.message_changed(message["id"])

    def load_context_sync(self, lease: Lease) -> list[UIMessage]:
        # The newest window of context-visible messages, so a step's cost does not grow
        # with the thread (messages are whole steps: a window never splits a tool call from
        # its result).
        window = pai_settings.CONTEXT_WINDOW_MESSAGES
        rows = Message.objects.filter(
            thread_id=lease.thread_id, in_context=True, status=Message.Status.COMMITTED
        ).values_list("message_id", "role", "parts")
        selected = list(rows.order_by("-id")[:window]) if window else list(rows.order_by("id"))
        if window:
            selected.reverse()
        return [
            UIMessage(id=mid, role=cast(MessageRole, role), parts=parts)
            for mid, role, parts in selected
        ]

    def commit_step_sync(
        self,
        lease: Lease,
        *,
        message: UIMessage,
        step: StepRecord,
        outcome: RunOutcome | None,
        replace_open: bool = False,
    ) -> None:
        run_changes: dict[str, Any] = {"step_count": step.index + 1}
        if outcome is not None:
            run_changes.update(_outcome_changes(outcome))
        fields = _output_message(lease, message, step.index)  # MF-045: checked before writing
        # MF-002: the step's own usage and diagnostics travel with its message.
        fields["usage"] = ensure_strict_json(dict(step.usage), what="usage")
        fields["diagnostics"] = ensure_strict_json(step_diagnostics(step), what="diagnostics")
        step_row = Step(
            run_id=lease.run_id,
            index=step.index,
            request=ensure_strict_json(dict(step.request), what="step request"),
            usage=fields["usage"],
            finish_reason=step.finish_reason,
            started_at=step.started_at,
            finished_at=step.finished_at,
        )
        ends = outcome is not None and outcome.status in TERMINAL_STATUSES
        if replace_open:
            fenced, row = self._commit_replacing(lease, fields, step_row, run_changes, outcome)
            self.facts.message_written(row, suspensions=True)
        elif connection.vendor == "postgresql" and not ends:
            # One autocommit statement: fence, message and Step row (see _write_step).
            fenced, row = _write_step(lease, run_changes, Message(**fields), step_row, sides=False)
        else:
            with transaction.atomic():
                _before_end(lease, outcome)
                fenced, row = _write_step(
                    lease, run_changes, Message(**fields), step_row, sides=ends
                )
                if ends:
                    _after_end(lease, fenced)
        if not replace_open:
            self._unsuspended.add(row.message_id)
            self.facts.message_written(row, suspensions=False)
        self._record(lease, fenced, ends=ends)

    def _commit_replacing(
        self,
        lease: Lease,
        fields: dict[str, Any],
        step_row: Step,
        run_changes: dict[str, Any],
        outcome: RunOutcome | None,
    ) -> tuple[_Fenced, Message]:
        """A checkpoint's (or a dead attempt's) open row becomes the committed message."""
        with transaction.atomic():
            ends = _before_end(lease, outcome)
            fenced = _fence_returning(lease, run_changes, sides=ends)
            row = Message.objects.filter(
                run_id=lease.run_id, step_index=step_row.index, status=Message.Status.OPEN
            ).first()
            if row is not None:
                row.message_id, row.parts = fields["message_id"], fields["parts"]
                row.usage, row.diagnostics = fields["usage"], fields["diagnostics"]
                row.status = Message.Status.COMMITTED
                row.save(
                    update_fields=[
                        "message_id",
                        "parts",
                        "usage",
                        "diagnostics",
                        "status",
                        "updated_at",
                    ]
                )
            else:
                row = Message.objects.create(**fields)
            step_row.message = row
            step_row.save(force_insert=True)
            if ends:
                _after_end(lease, fenced)
        return fenced, row

    def update_message_sync(
        self, lease: Lease, *, message: UIMessage, outcome: RunOutcome | None
    ) -> None:
        parts = _stored_parts(message)
        fenced: _Fenced | None = None
        ends = False
        if outcome is None:
            # No run change: one statement, fenced by a locking EXISTS on the run row.
            updated = _update_parts(lease, _message_of(lease, message), parts, fenced=True)
            if updated is None and not held_runs(lease).exists():
                raise LeaseLost(lease.run_id)
        else:
            with transaction.atomic():
                ends = _before_end(lease, outcome)
                fenced = _fence_returning(lease, _outcome_changes(outcome), sides=ends)
                updated = _update_parts(lease, _message_of(lease, message), parts, fenced=False)
                if updated is None:
                    raise LookupError(f"run {lease.run_id} has no message {message['id']}")
                if ends:
                    _after_end(lease, fenced)
        if updated is None:
            raise LookupError(f"run {lease.run_id} has no message {message['id']}")
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
            changes = _outcome_changes(RunOutcome(status="waiting", usage=usage))
            fenced = _fence_returning(lease, changes)
            stored = _message_of(lease, message).update(
                parts=_stored_parts(message), updated_at=timezone.now()
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
                    input=ensure_strict_json(action.input, what="tool input"),
                    request={"approvalId": action.approval_id} if action.approval_id else {},
                )
                for action in actions
            )
        self._unsuspended.discard(message["id"])
        self.facts.message_changed(message["id"])
        self._record(lease, fenced, ends=False)

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
        # One read, on resume only (the engine never asks on an initial dispatch).
        found: dict[str, list[SuspensionEpisode]] = {}
        rows = PendingAction.objects.filter(
            run_id=lease.run_id, tool_call_id__in=list(tool_call_ids)
        ).order_by("created_at", "id")
        for action in rows:
            found.setdefault(action.tool_call_id, []).append(suspension_episode(action))
        return found

    def take_steering_sync(self, lease: Lease) -> list[UIMessage]:
        if self.facts.queue_empty(lease.run_id):
            # A write of this execution just saw no queued input at all: nothing to take.
            return []
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
            ends = _before_end(lease, outcome)
            fenced = _fence_returning(lease, _outcome_changes(outcome), sides=ends)
            if discard_open_step is not None:
                Message.objects.filter(
                    run_id=lease.run_id, step_index=discard_open_step, status=Message.Status.OPEN
                ).delete()
            if ends:
                _after_end(lease, fenced)
        self._record(lease, fenced, ends=ends)

    # -- the async protocol --

    async def claim_run(self, run_id: str, *, owner: str, lease_seconds: float) -> ClaimedRun:
        return await _db(self.claim_run_sync, run_id, owner=owner, lease_seconds=lease_seconds)

    async def heartbeat(self, lease: Lease, *, lease_seconds: float) -> RunSignals:
        return await _db(self.heartbeat_sync, lease, lease_seconds=lease_seconds)

    async def checkpoint_message(
        self, lease: Lease, *, message: UIMessage, step_index: int
    ) -> None:
        await _db(self.checkpoint_message_sync, lease, message=message, step_index=step_index)

    async def suspend(
        self, lease: Lease, *, message: UIMessage, actions: Sequence[ActionRequest], usage: Usage
    ) -> None:
        await _db(self.suspend_sync, lease, message=message, actions=actions, usage=usage)

    async def begin_actions(self, lease: Lease, *, tool_call_ids: Sequence[str]) -> None:
        await _db(self.begin_actions_sync, lease, tool_call_ids=tool_call_ids)

    async def load_context(self, lease: Lease) -> list[UIMessage]:
        return await _db(self.load_context_sync, lease)

    async def suspend_history(
        self, lease: Lease, *, tool_call_ids: Collection[str]
    ) -> dict[str, list[SuspensionEpisode]]:
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
        await _db(
            self.commit_step_sync,
            lease,
            message=message,
            step=step,
            outcome=outcome,
            replace_open=replace_open,
        )

    async def update_message(
        self, lease: Lease, *, message: UIMessage, outcome: RunOutcome | None = None
    ) -> None:
        await _db(self.update_message_sync, lease, message=message, outcome=outcome)

    async def take_steering(self, lease: Lease) -> list[UIMessage]:
        return await _db(self.take_steering_sync, lease)

    async def finish_run(
        self, lease: Lease, outcome: RunOutcome, *, discard_open_step: int | None = None
    ) -> None:
        await _db(self.finish_run_sync, lease, outcome, discard_open_step=discard_open_step)

    # -- the lifecycle facade (pai_agents.engine.hooks.LifecycleStore); no I/O until used --

    def lifecycle_thread(self, lease: Lease, *, resolver: bool = False, schemas: Any = None) -> Any:
        from pai_threads.lifecycle_store import ORMLifecycleThread

        return ORMLifecycleThread(lease, resolver=resolver, schemas=schemas)

    def lifecycle_run_metadata(self, lease: Lease, *, schemas: Any = None) -> tuple[Any, Any]:
        from pai_threads.lifecycle_store import ORMRunMetadata

        run = schemas.run if schemas is not None else None
        return ORMRunMetadata(lease, "private", run), ORMRunMetadata(lease, "public", run)
