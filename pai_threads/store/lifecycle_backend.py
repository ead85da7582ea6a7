"""The lifecycle ``thread`` facade on the Django ORM: the ORM backend of the one facade.

The facade itself (validation, pages, staged ``mutate`` with compare-and-set, run metadata)
is :mod:`pai_agents.lifecycle.thread_facade`; this module implements its backend protocol
(:class:`~pai_agents.lifecycle.backend.LifecycleBackend`) on the models. The facade is bound
to the lease's thread and partition (LC-004); every write runs in one transaction that
starts with the fencing UPDATE on the run, so a hook that writes after its execution lost
the lease gets :class:`LeaseLost` and nothing is written (LC-032).

Typed metadata: with the agent's schemas (``schemas=``, an
:class:`~pai_agents.lifecycle.metadata.AgentMetadataSchemas`) every thread, run and message
metadata write is merged and validated as a complete object (AD-033, LC-025).

Realtime: once a write commits (``transaction.on_commit``), clients get its public
projections only: ``message.committed`` for appended transcript-visible messages,
``thread.updated`` (the public head) when public thread metadata or message visibility
changed, ``run.status`` (the public run) after a public run-metadata merge. Private-only
writes and rejected writes publish nothing (LC-029..LC-031).

Visibility writes (``messages.update_visibility``, also staged in ``mutate``) that change
something fire the agent's rewrite hooks' ``visibility`` variant like trusted rewrites
(:func:`pai_threads.store.rewrites.lifecycle_visibility_rewrite`, LC-066): the hook's patches
commit with the write; a raising hook rejects the write (``RewriteRejected``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from django.db import transaction
from django.db.models import F

from pai_agents.engine.events import RunEvent
from pai_agents.engine.store import Lease
from pai_agents.json import JsonObject
from pai_agents.lifecycle.backend import (
    Bag,
    LeaseLike,
    PageQuery,
    PositionedMessage,
    StagedWrite,
    ThreadHead,
    ThreadScope,
)
from pai_agents.lifecycle.facade import LifecycleMessage, MessageVisibility
from pai_agents.lifecycle.metadata import AgentMetadataSchemas, MetadataSchemas
from pai_agents.lifecycle.thread_facade import LifecycleThreadFacade, RunMetadataFacade
from pai_threads.events.projections import message_public, run_public
from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import message_committed, run_status_of, thread_updated
from pai_threads.models import Message, Run, Thread
from pai_threads.models.conditions import in_thread_order
from pai_threads.store import sql as store_sql
from pai_threads.store.db import run_db as _db
from pai_threads.store.rewrites import lifecycle_visibility_rewrite

__all__ = ["ORMLifecycleBackend", "ORMLifecycleThread", "ORMRunMetadata"]

T = TypeVar("T")
MAX_PAGE_SIZE = 50
_COLUMNS: dict[Bag, str] = {"private": "private_metadata", "public": "metadata"}


def _lifecycle_message(row: Message) -> LifecycleMessage:
    return LifecycleMessage(
        id=row.message_id,
        role=row.role,  # type: ignore[arg-type]
        parts=tuple(row.parts),
        metadata=dict(row.metadata or {}),
        visibility=MessageVisibility(transcript=row.in_transcript, context=row.in_context),
        private_metadata=dict(row.private_metadata or {}),
    )


def _committed(scope: ThreadScope) -> Any:
    """The scope's committed rows, of any thread: each caller below picks the thread its
    own way (an equality, or the form that plans on the thread's index)."""
    return Message.objects.filter(scope_key=scope.scope_key, status=Message.Status.COMMITTED)


def _rows(scope: ThreadScope) -> Any:
    """The committed rows of the scope's thread."""
    return _committed(scope).filter(thread_id=scope.thread_id)


def _ordered_rows(scope: ThreadScope, *, descending: bool) -> Any:
    """The committed rows of the scope's thread in position order, planned on the thread's
    index (models.conditions.in_thread_order)."""
    return in_thread_order(_committed(scope), scope.thread_id, descending=descending)


def _keep_open_tail(thread_id: str, first_appended: int) -> None:
    """MF-043: only the thread's tail may be open, and a hook may append while a step
    streams into the open message (LC-011, LC-032): the open row moves behind the appended
    ones (a new position, its creation time kept), so the step's next checkpoint and its
    commit find it at the tail. No step row refers to an open message yet."""
    row = Message.objects.filter(
        thread_id=thread_id, status=Message.Status.OPEN, pk__lt=first_appended
    ).first()
    if row is None:
        return
    created = row.created_at
    Message.objects.filter(pk=row.pk).delete()
    row.pk = None
    row.save(force_insert=True)
    Message.objects.filter(pk=row.pk).update(created_at=created)


def _publish_on_commit(thread_id: str, events: Sequence[RunEvent]) -> None:
    """Publish ``events`` after the current transaction commits (never for a rollback)."""
    if events:
        publish_after_commit(thread_id, list(events))


class ORMLifecycleBackend:
    """:class:`~pai_agents.lifecycle.backend.LifecycleBackend` on the models."""

    max_page_size = MAX_PAGE_SIZE

    def call(self, fn: Callable[[], T]) -> Awaitable[T]:
        return _db(fn)  # a database thread; runs when awaited

    def atomic(self) -> AbstractContextManager[Any]:
        return transaction.atomic()

    def fence(self, lease: LeaseLike) -> None:
        """The engine's fencing UPDATE: it also locks the run until the transaction ends."""
        store_sql.fence(lease)

    def lock_thread(self, scope: ThreadScope) -> ThreadHead:
        thread = Thread.objects.select_for_update().get(
            id=scope.thread_id, scope_key=scope.scope_key
        )
        return ThreadHead(
            version=thread.version,
            private=dict(thread.private_metadata),
            public=dict(thread.metadata),
            handle=thread,
        )

    def persist(self, scope: ThreadScope, head: ThreadHead, write: StagedWrite) -> None:
        thread: Thread = head.handle
        if write.visibility:  # lifecycle visibility writes fire the rewrite hooks (LC-066)
            write.private, write.public = lifecycle_visibility_rewrite(
                thread,
                scope.lease.run_id,
                write.before,
                write.visibility,
                private=write.private,
                public=write.public,
            )
        appended = [
            Message.objects.create(
                message_id=message.id,
                thread_id=scope.thread_id,
                scope_key=scope.scope_key,
                run_id=None,
                role=message.role,
                parts=list(message.parts),
                metadata=dict(message.metadata),
                private_metadata=dict(message.private_metadata),
                producer=Message.Producer.LIFECYCLE,
                relation=Message.Relation.CONTEXT,
                in_transcript=message.visibility.transcript,
                in_context=message.visibility.context,
            )
            for message in write.appended
        ]
        if appended:
            _keep_open_tail(scope.thread_id, appended[0].pk)
        for message_id, visibility in write.visibility.items():
            _rows(scope).filter(message_id=message_id).update(
                in_transcript=visibility.transcript, in_context=visibility.context
            )
        Thread.objects.filter(id=scope.thread_id).update(
            private_metadata=write.private, metadata=write.public, version=F("version") + 1
        )
        # Client-visible events, public projections only, sent once committed (LC-029..031):
        # a change of private metadata alone publishes no thread head.
        visible = Message.objects.filter(pk__in=[r.pk for r in appended if r.in_transcript])
        events: list[RunEvent] = [
            message_committed(scope.thread_id, message_public(row))
            for row in visible.order_by("id")  # as stored (plain values, not enum members)
        ]
        if write.public != thread.metadata or write.visibility:
            thread.refresh_from_db()
            events.append(thread_updated(thread))
        _publish_on_commit(scope.thread_id, events)

    def positions(self, scope: ThreadScope, message_ids: Collection[str]) -> Mapping[str, int]:
        found = _rows(scope).filter(message_id__in=list(message_ids))
        return dict(found.values_list("message_id", "id"))

    def page(self, scope: ThreadScope, query: PageQuery) -> Sequence[PositionedMessage]:
        rows = _ordered_rows(scope, descending=query.descending)
        if query.view == "context":
            rows = rows.filter(in_context=True)
        elif query.view == "transcript":
            rows = rows.filter(in_transcript=True)
        if query.above is not None:
            rows = rows.filter(id__gt=query.above)
        if query.below is not None:
            rows = rows.filter(id__lt=query.below)
        fetched = rows[: query.limit]
        return [PositionedMessage(row.id, _lifecycle_message(row)) for row in fetched]

    def get_many(
        self, scope: ThreadScope, message_ids: Collection[str]
    ) -> Mapping[str, LifecycleMessage]:
        found = _rows(scope).filter(message_id__in=list(message_ids))
        return {row.message_id: _lifecycle_message(row) for row in found}

    def thread_bag(self, scope: ThreadScope, which: Bag) -> JsonObject:
        value = (
            Thread.objects.filter(id=scope.thread_id, scope_key=scope.scope_key)
            .values_list(_COLUMNS[which], flat=True)
            .first()
        )
        return dict(value or {})

    def run_bag(self, lease: LeaseLike, which: Bag) -> JsonObject:
        value = Run.objects.filter(id=lease.run_id).values_list(_COLUMNS[which], flat=True).first()
        return dict(value or {})

    def write_run_bag(self, lease: LeaseLike, which: Bag, value: JsonObject) -> None:
        Run.objects.filter(id=lease.run_id).update(**{_COLUMNS[which]: value})
        if which == "public":  # private run metadata is never published
            run = Run.objects.get(id=lease.run_id)
            _publish_on_commit(run.thread_id, [run_status_of(run_public(run))])


BACKEND = ORMLifecycleBackend()


class ORMLifecycleThread(LifecycleThreadFacade):
    """:class:`~pai_agents.lifecycle.facade.LifecycleThread` on the ORM (or, with
    ``resolver=True``, the resolver facade without visibility writes)."""

    def __init__(
        self,
        lease: Lease,
        *,
        resolver: bool = False,
        schemas: AgentMetadataSchemas | None = None,
    ) -> None:
        scope = ThreadScope(
            scope_key=lease.scope_key,
            thread_id=lease.thread_id,
            lease=lease,
            thread_schemas=schemas.thread if schemas is not None else None,
            message_schemas=schemas.message if schemas is not None else None,
        )
        super().__init__(BACKEND, scope, resolver=resolver)


class ORMRunMetadata(RunMetadataFacade):
    """``run.private_metadata`` / ``run.metadata``: fenced by the run owner (LC-033)."""

    def __init__(self, lease: Lease, which: Bag, schemas: MetadataSchemas | None = None) -> None:
        super().__init__(BACKEND, lease, which, schemas)
