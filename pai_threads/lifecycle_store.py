"""The lifecycle ``thread`` facade on the Django ORM, fenced by the execution lease.

Hooks reach durable state only through this facade (LC-003): it is bound to one thread of
one partition (LC-004) and every write runs in one transaction that starts with the same
fencing UPDATE as the engine's own writes (:func:`pai_threads.store._fence`), so a hook
that writes after its execution lost the lease gets :class:`LeaseLost` and nothing is
written (LC-032). ``mutate`` stages writes and commits them together, optionally as a
compare-and-set on the thread version or its private metadata (LC-035..LC-039).

Validation (roles, native parts, strict JSON metadata) is the reference backend's
(:mod:`pai_agents.lifecycle.memory`), so both stores accept and refuse the same writes.

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
(:func:`pai_threads.rewrites.lifecycle_visibility_rewrite`, LC-066): the hook's patches
commit with the write; a raising hook rejects the write (``RewriteRejected``).
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from django.db import transaction
from django.db.models import F, Q

from pai_agents._callables import call_user
from pai_agents.engine.store import Lease
from pai_agents.lifecycle._tokens import decode_page_token, encode_page_token
from pai_agents.lifecycle.facade import (
    ContextProjection,
    InvalidLifecycleWrite,
    LifecycleMessage,
    MessageOrder,
    MessageView,
    MessageVisibility,
    MutationConflict,
    Page,
)
from pai_agents.lifecycle.memory import InMemoryLifecycleStore, _bag, _merged
from pai_agents.lifecycle.metadata import AgentMetadataSchemas, MetadataSchemas
from pai_agents.messages.model_messages import to_model_messages
from pai_agents.messages.types import UIMessagePart
from pai_threads.db import run_db as _db
from pai_threads.models import Message, Run, Thread
from pai_threads.realtime.announce import message_committed, run_status
from pai_threads.realtime.heads import thread_updated
from pai_threads.realtime.projections import message_public, run_public
from pai_threads.realtime.publisher import publish_sync
from pai_threads.rewrites import lifecycle_visibility_rewrite
from pai_threads.store import _fence

__all__ = ["ORMLifecycleThread", "ORMRunMetadata", "ORMScope"]

T = TypeVar("T")
MAX_PAGE_SIZE = 50
_VALIDATOR = InMemoryLifecycleStore()  # the reference write validation (roles, parts, JSON)


@dataclass(frozen=True, kw_only=True)
class ORMScope:
    """One thread of one partition, written under one lease."""

    lease: Lease
    schemas: AgentMetadataSchemas | None = None

    def schema(self, kind: Literal["thread", "message"], which: str) -> Any:
        pair: MetadataSchemas | None = getattr(self.schemas, kind, None)
        return None if pair is None else getattr(pair, which)

    @property
    def thread_id(self) -> str:
        return self.lease.thread_id

    @property
    def scope_key(self) -> str:
        return self.lease.scope_key


@dataclass(kw_only=True)
class _Work:
    private: dict[str, Any]
    public: dict[str, Any]
    appended: list[LifecycleMessage] = field(default_factory=list)
    visibility: dict[str, MessageVisibility] = field(default_factory=dict)


_Op = Callable[[_Work], None]


def _lifecycle_message(row: Message) -> LifecycleMessage:
    return LifecycleMessage(
        id=row.message_id,
        role=row.role,  # type: ignore[arg-type]
        parts=tuple(row.parts),
        metadata=dict(row.metadata or {}),
        visibility=MessageVisibility(transcript=row.in_transcript, context=row.in_context),
        private_metadata=dict(row.private_metadata or {}),
    )


def _rows(scope: ORMScope) -> Any:
    return Message.objects.filter(
        thread_id=scope.thread_id, scope_key=scope.scope_key, status=Message.Status.COMMITTED
    )


def _commit_sync(
    scope: ORMScope,
    ops: Sequence[_Op],
    expected_version: int | None,
    expected_private: Mapping[str, Any] | None,
) -> None:
    """One transaction: fence, compare, apply every staged op, bump the version once."""
    with transaction.atomic():
        _fence(scope.lease)  # LeaseLost before anything is written (LC-032)
        thread = Thread.objects.select_for_update().get(
            id=scope.thread_id, scope_key=scope.scope_key
        )
        if expected_version is not None and expected_version != thread.version:
            raise MutationConflict(
                f"thread version is {thread.version}, expected {expected_version}"
            )
        if expected_private is not None and dict(expected_private) != thread.private_metadata:
            raise MutationConflict("thread private metadata changed")
        work = _Work(private=dict(thread.private_metadata), public=dict(thread.metadata))
        for op in ops:
            op(work)  # raising here rolls the transaction back (LC-036)
        if not ops:
            return
        if work.visibility:  # lifecycle visibility writes fire the rewrite hooks (LC-066)
            current = {
                r.message_id: MessageVisibility(transcript=r.in_transcript, context=r.in_context)
                for r in _rows(scope).filter(message_id__in=builtins.list(work.visibility))
            }
            work.private, work.public = lifecycle_visibility_rewrite(
                thread,
                scope.lease.run_id,
                current,
                work.visibility,
                private=work.private,
                public=work.public,
            )
        appended: list[Message] = []
        for message in work.appended:
            row = Message.objects.create(
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
            appended.append(row)
        for message_id, visibility in work.visibility.items():
            _rows(scope).filter(message_id=message_id).update(
                in_transcript=visibility.transcript, in_context=visibility.context
            )
        Thread.objects.filter(id=scope.thread_id).update(
            private_metadata=work.private, metadata=work.public, version=F("version") + 1
        )
        # Client-visible events, public projections only, sent once committed (LC-029..031):
        # a change of private metadata alone publishes no thread head.
        visible = Message.objects.filter(pk__in=[r.pk for r in appended if r.in_transcript])
        events: list[dict[str, Any]] = [
            message_committed(scope.thread_id, message_public(row))
            for row in visible.order_by("id")  # as stored (plain values, not enum members)
        ]
        if work.public != thread.metadata or work.visibility:
            thread.refresh_from_db()
            events.append(thread_updated(thread))
        _publish_on_commit(scope.thread_id, events)


def _publish_on_commit(thread_id: str, events: builtins.list[dict[str, Any]]) -> None:
    """Publish ``events`` after the current transaction commits (never for a rollback)."""
    if events:
        transaction.on_commit(lambda: publish_sync(thread_id, events))


def _page_sync(
    scope: ORMScope,
    view: MessageView,
    order: MessageOrder,
    before_message_id: str | None,
    after_message_id: str | None,
    limit: int | None,
    page_token: str | None,
) -> Page[LifecycleMessage]:
    if view not in ("context", "transcript", "all") or order not in ("asc", "desc"):
        raise ValueError(f"bad query: view={view!r} order={order!r}")
    rows = _rows(scope)
    if view == "context":
        rows = rows.filter(in_context=True)
    elif view == "transcript":
        rows = rows.filter(in_transcript=True)
    for bound, op in ((after_message_id, "gt"), (before_message_id, "lt")):
        if bound is not None:
            position = _rows(scope).filter(message_id=bound).values_list("id", flat=True).first()
            if position is None:
                raise LookupError(f"message {bound!r} is not in this thread")
            rows = rows.filter(**{f"id__{op}": position})
    if page_token is not None:
        cursor = decode_page_token(page_token)
        rows = rows.filter(Q(id__gt=cursor) if order == "asc" else Q(id__lt=cursor))
    size = max(1, min(limit or MAX_PAGE_SIZE, MAX_PAGE_SIZE))
    fetched = list(rows.order_by("id" if order == "asc" else "-id")[: size + 1])
    page = fetched[:size]
    token = encode_page_token(page[-1].id) if len(fetched) > size else None
    return Page(items=tuple(_lifecycle_message(r) for r in page), next_page_token=token)


class _Ready(Awaitable[T]):
    """An awaitable whose value is already known (a staged write)."""

    def __init__(self, value: T) -> None:
        self._value = value

    def __await__(self) -> Generator[Any, None, T]:
        if False:  # pragma: no cover - makes this a generator
            yield
        return self._value


async def _commit_then(scope: ORMScope, op: _Op, value: T) -> T:
    await _db(_commit_sync, scope, [op], None, None)
    return value


class _Writer:
    def __init__(self, scope: ORMScope, staged: list[_Op] | None) -> None:
        self._scope = scope
        self._staged = staged

    def _write(self, op: _Op, value: T) -> Awaitable[T]:
        """Stage ``op`` inside mutate() (done at once, so sync hooks need not await), or
        commit it in its own fenced transaction when awaited."""
        if self._staged is not None:
            self._staged.append(op)  # committed by mutate() after its callback returns
            return _Ready(value)
        return _commit_then(self._scope, op, value)


class _Messages(_Writer):
    def list(
        self,
        *,
        view: MessageView = "all",
        order: MessageOrder = "asc",
        before_message_id: str | None = None,
        after_message_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> Awaitable[Page[LifecycleMessage]]:
        return _db(
            _page_sync,
            self._scope,
            view,
            order,
            before_message_id,
            after_message_id,
            limit,
            page_token,
        )

    async def get(self, message_id: str) -> LifecycleMessage | None:
        def read() -> LifecycleMessage | None:
            row = _rows(self._scope).filter(message_id=message_id).first()
            return None if row is None else _lifecycle_message(row)

        return await _db(read)

    async def get_many(self, message_ids: Sequence[str]) -> builtins.list[LifecycleMessage]:
        ids = builtins.list(message_ids)

        def read() -> builtins.list[LifecycleMessage]:
            found = {r.message_id: r for r in _rows(self._scope).filter(message_id__in=ids)}
            return [_lifecycle_message(found[i]) for i in ids if i in found]

        return await _db(read)

    def append(
        self,
        *,
        role: Literal["system", "user", "assistant"],
        parts: Sequence[UIMessagePart],
        visibility: Mapping[str, bool] | MessageVisibility | None = None,
        metadata: Mapping[str, Any] | None = None,
        private_metadata: Mapping[str, Any] | None = None,
    ) -> Awaitable[LifecycleMessage]:
        message = _VALIDATOR._message_for(
            role,
            parts,
            visibility,
            metadata,
            private_metadata,
            getattr(self._scope.schemas, "message", None),
        )

        def op(work: _Work) -> None:
            work.appended.append(message)

        return self._write(op, message)

    def update_visibility(
        self,
        message_ids: Sequence[str],
        *,
        transcript: bool | None = None,
        context: bool | None = None,
    ) -> Awaitable[None]:
        scope, ids = self._scope, builtins.list(message_ids)

        def op(work: _Work) -> None:
            current = {
                r.message_id: MessageVisibility(transcript=r.in_transcript, context=r.in_context)
                for r in _rows(scope).filter(message_id__in=ids)
            }
            for message_id in ids:
                if message_id not in current:
                    raise InvalidLifecycleWrite(f"message {message_id!r} is not in this thread")
                before = work.visibility.get(message_id, current[message_id])
                work.visibility[message_id] = MessageVisibility(
                    transcript=before.transcript if transcript is None else transcript,
                    context=before.context if context is None else context,
                )

        return self._write(op, None)


class _ResolverMessages(_Messages):
    """resolve_model_context's message client: no ``update_visibility`` (LC-049)."""

    update_visibility = None  # type: ignore[assignment]


class _ThreadMetadata(_Writer):
    def __init__(
        self, scope: ORMScope, which: Literal["private", "public"], staged: list[_Op] | None
    ) -> None:
        super().__init__(scope, staged)
        self._which = which

    async def get(self) -> Mapping[str, Any]:
        column = "private_metadata" if self._which == "private" else "metadata"
        scope = self._scope

        def read() -> Mapping[str, Any]:
            value = (
                Thread.objects.filter(id=scope.thread_id, scope_key=scope.scope_key)
                .values_list(column, flat=True)
                .first()
            )
            return dict(value or {})

        return await _db(read)

    def merge(self, patch: Mapping[str, Any]) -> Awaitable[None]:
        which, what = self._which, f"thread {self._which} metadata"
        schema = self._scope.schema("thread", which)

        def op(work: _Work) -> None:
            setattr(work, which, _merged(schema, getattr(work, which), patch, what))

        return self._write(op, None)

    def replace(self, value: Mapping[str, Any]) -> Awaitable[None]:
        which, what = self._which, f"thread {self._which} metadata"
        schema = self._scope.schema("thread", which)

        def op(work: _Work) -> None:
            setattr(work, which, _bag(schema, value, what))

        return self._write(op, None)


class _Context:
    def __init__(self, scope: ORMScope) -> None:
        self._scope = scope

    def messages(
        self,
        *,
        before_message_id: str | None = None,
        after_message_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> Awaitable[Page[LifecycleMessage]]:
        return _db(
            _page_sync,
            self._scope,
            "context",
            "asc",
            before_message_id,
            after_message_id,
            limit,
            page_token,
        )

    async def current(
        self,
        *,
        before_message_id: str | None = None,
        after_message_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> ContextProjection:
        page = await self.messages(
            before_message_id=before_message_id,
            after_message_id=after_message_id,
            limit=limit,
            page_token=page_token,
        )
        return ContextProjection(
            messages=page.items,
            model_messages=tuple(to_model_messages([m.to_ui_message() for m in page.items])),
            next_page_token=page.next_page_token,
        )


class _Transaction:
    def __init__(self, scope: ORMScope, staged: list[_Op], *, resolver: bool) -> None:
        self.messages = (_ResolverMessages if resolver else _Messages)(scope, staged)
        self.private_metadata = _ThreadMetadata(scope, "private", staged)
        self.metadata = _ThreadMetadata(scope, "public", staged)
        self.context = _Context(scope)


class ORMLifecycleThread:
    """:class:`~pai_agents.lifecycle.facade.LifecycleThread` on the ORM (or, with
    ``resolver=True``, the resolver facade without visibility writes)."""

    def __init__(
        self,
        lease: Lease,
        *,
        resolver: bool = False,
        schemas: AgentMetadataSchemas | None = None,
    ) -> None:
        self._scope = ORMScope(lease=lease, schemas=schemas)
        self._resolver = resolver
        self.messages = (_ResolverMessages if resolver else _Messages)(self._scope, None)
        self.private_metadata = _ThreadMetadata(self._scope, "private", None)
        self.metadata = _ThreadMetadata(self._scope, "public", None)
        self.context = _Context(self._scope)

    @property
    def thread_id(self) -> str:
        return self._scope.thread_id

    async def mutate(
        self,
        fn: Callable[[Any], T | Awaitable[T]],
        *,
        expected_version: int | None = None,
        expected_private_metadata: Mapping[str, Any] | None = None,
    ) -> T:
        staged: list[_Op] = []
        tx = _Transaction(self._scope, staged, resolver=self._resolver)
        result: T = await call_user(fn, tx)
        await _db(_commit_sync, self._scope, staged, expected_version, expected_private_metadata)
        return result


class ORMRunMetadata:
    """``run.private_metadata`` / ``run.metadata``: fenced by the run owner (LC-033)."""

    def __init__(
        self,
        lease: Lease,
        which: Literal["private", "public"],
        schemas: MetadataSchemas | None = None,
    ) -> None:
        self._lease = lease
        self._column = "private_metadata" if which == "private" else "metadata"
        self._schema = None if schemas is None else getattr(schemas, which)

    async def get(self) -> Mapping[str, Any]:
        def read() -> Mapping[str, Any]:
            value = (
                Run.objects.filter(id=self._lease.run_id).values_list(self._column, flat=True)
            ).first()
            return dict(value or {})

        return await _db(read)

    async def merge(self, patch: Mapping[str, Any]) -> Mapping[str, Any]:
        def write() -> Mapping[str, Any]:
            with transaction.atomic():
                _fence(self._lease)
                current = (
                    Run.objects.filter(id=self._lease.run_id)
                    .values_list(self._column, flat=True)
                    .get()
                )
                merged = _merged(self._schema, dict(current or {}), patch, f"run {self._column}")
                Run.objects.filter(id=self._lease.run_id).update(**{self._column: merged})
                if self._column == "metadata":  # private run metadata is never published
                    run = Run.objects.get(id=self._lease.run_id)
                    _publish_on_commit(run.thread_id, [run_status(run_public(run))])
                return merged

        return await _db(write)
