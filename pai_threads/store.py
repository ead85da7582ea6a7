"""The ORM implementation of the engine's :class:`ThreadStore`.

Each method is one short synchronous transaction, called from the engine through
``sync_to_async``. Fencing: a write transaction starts with a conditional UPDATE of the run
row (``lease_token = <ours> AND status = running``); zero rows means the lease is gone and
the transaction raises :class:`LeaseLost` before writing anything. The UPDATE also locks
the run row until commit, so a concurrent claim (which bumps the token) waits for us.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ParamSpec, TypeVar, cast

from asgiref.sync import sync_to_async
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone
from django.utils.dateparse import parse_datetime

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
from pai_threads.models import Message, PendingAction, QueueItem, Run, Step
from pai_threads.queueing import admit_next, lock_thread
from pai_threads.suspensions import suspension_episode

__all__ = ["ORMThreadStore"]


P = ParamSpec("P")
T = TypeVar("T")


def _close_after(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    try:
        return fn(*args, **kwargs)
    finally:
        close_old_connections()


async def _db(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a sync store operation in a worker thread, with Django's connection lifecycle.

    Worker threads are not requests, so nothing else would close their connections; each
    operation ends like a request does (``close_old_connections``), which honours
    CONN_MAX_AGE and connection pooling instead of leaking one connection per thread.
    """
    return await sync_to_async(_close_after, thread_sensitive=False)(fn, *args, **kwargs)


def _fence(lease: Lease, **changes: Any) -> None:
    """Check (and lock) the lease inside the current transaction, applying ``changes``."""
    fenced = Run.objects.filter(id=lease.run_id, lease_token=lease.token, status=Run.Status.RUNNING)
    if fenced.update(**(changes or {"lease_token": F("lease_token")})) != 1:
        raise LeaseLost(lease.run_id)


_CLAIM_COLUMNS = (
    "thread_id",
    "agent_name",
    "scope_key",
    "identity",
    "client_data",
    "initiator",
    "step_count",
    "attempt",
    "lease_token",
    "usage",
    "started_at",
)
_JSON_COLUMNS = frozenset({"identity", "client_data", "usage"})


def _claim_returning(run_id: str, *, owner: str, lease_seconds: float) -> dict[str, Any] | None:
    """Claim in one statement: a conditional UPDATE ... RETURNING, in autocommit.

    The WHERE clause is the whole claim rule (queued, or running with an expired lease); the
    token increment is the fence every later write of this execution checks. One round trip
    instead of a transaction with an UPDATE and a SELECT.
    """
    now = timezone.now()
    ops = connection.ops
    table = ops.quote_name(Run._meta.db_table)
    # Identifiers are the model's own table and constant column names; values are parameters.
    sql = (
        f"UPDATE {table} SET status = %s, lease_owner = %s, lease_expires_at = %s, "  # noqa: S608
        "lease_token = lease_token + 1, attempt = attempt + 1, "
        "started_at = COALESCE(started_at, %s) "
        "WHERE id = %s AND (status = %s OR (status = %s AND lease_expires_at < %s)) "
        f"RETURNING {', '.join(_CLAIM_COLUMNS)}"
    )
    params = [
        Run.Status.RUNNING.value,
        owner,
        ops.adapt_datetimefield_value(now + timedelta(seconds=lease_seconds)),
        ops.adapt_datetimefield_value(now),
        run_id,
        Run.Status.QUEUED.value,
        Run.Status.RUNNING.value,
        ops.adapt_datetimefield_value(now),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    values = dict(zip(_CLAIM_COLUMNS, row, strict=True))
    for column in _JSON_COLUMNS:
        if isinstance(values[column], str | bytes):
            values[column] = json.loads(values[column])
    values["started_at"] = _aware(values["started_at"])
    return values


def _aware(value: datetime | str | None) -> datetime | None:
    """A raw cursor's datetime as an aware UTC value (SQLite returns naive UTC text)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value


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


def _before_end(lease: Lease, outcome: RunOutcome | None) -> None:
    """First in a transaction that may end the run: take the thread lock (see lock_thread)."""
    if outcome is not None and outcome.status in TERMINAL_STATUSES:
        lock_thread(lease.thread_id)


def _after_end(lease: Lease, outcome: RunOutcome) -> None:
    """Inside the ending transaction: the next queued input starts once the run ends."""
    if outcome.status in TERMINAL_STATUSES:
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
    """Persistence for the engine on the Django ORM (SQLite or PostgreSQL)."""

    # -- sync implementations (each one transaction) --

    def claim_run_sync(self, run_id: str, *, owner: str, lease_seconds: float) -> ClaimedRun:
        row = _claim_returning(run_id, owner=owner, lease_seconds=lease_seconds)
        if row is None:
            raise RunNotFound(run_id)
        run = Run(id=run_id, **row)
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
        _fence(lease, lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds))
        cancel = Run.objects.filter(id=lease.run_id).values_list("cancel_requested_at", flat=True)
        return RunSignals(cancel_requested=cancel.first() is not None)

    def checkpoint_message_sync(self, lease: Lease, *, message: UIMessage, step_index: int) -> None:
        parts = _stored_parts(message)
        if message["role"] != "assistant":
            raise OpenMessageConflict("only an assistant message can be open (MF-043)")
        # MF-043: stream only into the thread's tail, folded into the UPDATE's WHERE (one
        # index probe, no extra round trip); a message after it makes the UPDATE match
        # nothing, and the INSERT then meets the one-open-message index.
        later = Message.objects.filter(thread_id=lease.thread_id, pk__gt=OuterRef("pk"))
        try:
            with transaction.atomic():
                _fence(lease)
                updated = (
                    Message.objects.filter(
                        run_id=lease.run_id, step_index=step_index, status=Message.Status.OPEN
                    )
                    .filter(~Exists(later))
                    .update(parts=parts, updated_at=timezone.now())
                )
                if not updated:
                    Message.objects.create(
                        **_output_message(lease, message, step_index),
                        status=Message.Status.OPEN,
                    )
        except IntegrityError as exc:
            raise OpenMessageConflict(
                f"message {message['id']} cannot be open: another message of the thread is "
                "open, or it is not the thread's tail (MF-043)"
            ) from exc

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
        with transaction.atomic():
            _before_end(lease, outcome)
            _fence(lease, **run_changes)
            row = None
            if replace_open:
                # A checkpoint (or a dead attempt's) open row becomes the committed message.
                row = Message.objects.filter(
                    run_id=lease.run_id, step_index=step.index, status=Message.Status.OPEN
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
            Step.objects.create(
                run_id=lease.run_id,
                index=step.index,
                message=row,
                request=ensure_strict_json(dict(step.request), what="step request"),
                usage=fields["usage"],
                finish_reason=step.finish_reason,
                started_at=step.started_at,
                finished_at=step.finished_at,
            )
            if outcome is not None:
                _after_end(lease, outcome)

    def update_message_sync(
        self, lease: Lease, *, message: UIMessage, outcome: RunOutcome | None
    ) -> None:
        with transaction.atomic():
            _before_end(lease, outcome)
            if outcome is not None:
                _fence(lease, **_outcome_changes(outcome))
            else:
                _fence(lease)
            updated = Message.objects.filter(run_id=lease.run_id, message_id=message["id"]).update(
                parts=_stored_parts(message),
                updated_at=timezone.now(),
            )
            if updated != 1:
                raise LookupError(f"run {lease.run_id} has no message {message['id']}")
            if outcome is not None:
                _after_end(lease, outcome)

    def suspend_sync(
        self,
        lease: Lease,
        *,
        message: UIMessage,
        actions: Sequence[ActionRequest],
        usage: Usage,
    ) -> None:
        with transaction.atomic():
            _fence(lease, **_outcome_changes(RunOutcome(status="waiting", usage=usage)))
            Message.objects.filter(run_id=lease.run_id, message_id=message["id"]).update(
                parts=_stored_parts(message),
                updated_at=timezone.now(),
            )
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

    def begin_actions_sync(self, lease: Lease, *, tool_call_ids: Sequence[str]) -> None:
        with transaction.atomic():
            _fence(lease)
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
            _fence(lease)
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
            _before_end(lease, outcome)
            _fence(lease, **_outcome_changes(outcome))
            if discard_open_step is not None:
                Message.objects.filter(
                    run_id=lease.run_id, step_index=discard_open_step, status=Message.Status.OPEN
                ).delete()
            _after_end(lease, outcome)

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
