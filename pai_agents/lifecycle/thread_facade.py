"""The lifecycle ``thread`` and ``run`` metadata facades, written once over any backend.

Hooks reach durable state only through these (LC-003). The facade is bound to one thread of
one partition (LC-004); it validates every write (:mod:`.validation`), builds pages with
opaque tokens (LC-021..LC-023) and stages ``mutate``'s writes to commit them together,
optionally as a compare-and-set on the thread version or its private metadata
(LC-035..LC-039). Every write is fenced by the execution's lease: once the run is waiting,
terminal or taken over, it raises :class:`~pai_agents.engine.store.LeaseLost` and writes
nothing (LC-032, LC-033). The storage is a :class:`~.backend.LifecycleBackend`.

A write outside ``mutate`` commits on its own in one fenced transaction; inside ``mutate``
it is staged at once (sync hooks need not await it) and committed after the callback
returns. Reads inside ``mutate`` see persisted state only (LC-037).
"""

from __future__ import annotations

import builtins
import copy
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, TypeVar

from pai_agents._callables import call_user
from pai_agents.json import JsonObject
from pai_agents.lifecycle._tokens import decode_page_token, encode_page_token
from pai_agents.lifecycle.backend import (
    Bag,
    LeaseLike,
    LifecycleBackend,
    PageQuery,
    Ready,
    StagedWrite,
    ThreadScope,
)
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
from pai_agents.lifecycle.metadata import MetadataSchemas, SchemaLike
from pai_agents.lifecycle.validation import (
    merged_bag,
    new_lifecycle_message,
    partial_visibility,
    validated_bag,
    with_visibility,
)
from pai_agents.messages.model_messages import to_model_messages
from pai_agents.messages.types import UIMessagePart

__all__ = ["LifecycleThreadFacade", "RunMetadataFacade", "StagedOp", "commit_staged", "read_page"]

T = TypeVar("T")
StagedOp: TypeAlias = Callable[[StagedWrite], None]


def read_page(
    backend: LifecycleBackend,
    scope: ThreadScope,
    *,
    view: MessageView,
    order: MessageOrder,
    before_message_id: str | None = None,
    after_message_id: str | None = None,
    limit: int | None = None,
    page_token: str | None = None,
) -> Page[LifecycleMessage]:
    """One bounded page (LC-016, LC-021, LC-022); bounds are exclusive message ids."""
    if view not in ("context", "transcript", "all") or order not in ("asc", "desc"):
        raise ValueError(f"bad query: view={view!r} order={order!r}")
    bounds = [b for b in (after_message_id, before_message_id) if b is not None]
    found = backend.positions(scope, bounds) if bounds else {}
    for bound in bounds:
        if bound not in found:
            raise LookupError(f"message {bound!r} is not in this thread")
    above = found.get(after_message_id) if after_message_id is not None else None
    below = found.get(before_message_id) if before_message_id is not None else None
    if page_token is not None:  # the token continues the same query past its cursor
        cursor = decode_page_token(page_token)
        if order == "asc":
            above = cursor if above is None else max(above, cursor)
        else:
            below = cursor if below is None else min(below, cursor)
    size = max(1, min(limit or backend.max_page_size, backend.max_page_size))
    query = PageQuery(
        view=view, descending=order == "desc", above=above, below=below, limit=size + 1
    )
    fetched = backend.page(scope, query)
    page = fetched[:size]
    token = encode_page_token(page[-1].position) if len(fetched) > size else None
    return Page(items=tuple(row.message for row in page), next_page_token=token)


def commit_staged(
    backend: LifecycleBackend,
    scope: ThreadScope,
    ops: Sequence[StagedOp],
    *,
    expected_version: int | None = None,
    expected_private: Mapping[str, Any] | None = None,
) -> None:
    """One transaction: fence, compare, apply every staged op, persist with one new version."""
    with backend.atomic():
        backend.fence(scope.lease)  # LeaseLost before anything is written (LC-032)
        head = backend.lock_thread(scope)
        if expected_version is not None and expected_version != head.version:
            raise MutationConflict(f"thread version is {head.version}, expected {expected_version}")
        if expected_private is not None and dict(expected_private) != head.private:
            raise MutationConflict("thread private metadata changed")
        write = StagedWrite(private=copy.deepcopy(head.private), public=copy.deepcopy(head.public))
        for op in ops:
            op(write)  # raising here writes nothing (LC-036)
        if ops:
            backend.persist(scope, head, write)


class _Client:
    def __init__(
        self, backend: LifecycleBackend, scope: ThreadScope, staged: list[StagedOp] | None
    ) -> None:
        self._backend = backend
        self._scope = scope
        self._staged = staged

    def _write(self, op: StagedOp, value: T) -> Awaitable[T]:
        """Stage ``op`` inside mutate(), or commit it in its own fenced transaction."""
        if self._staged is not None:
            self._staged.append(op)  # committed by mutate() after its callback returns
            return Ready(value)
        backend, scope = self._backend, self._scope

        def commit() -> T:
            commit_staged(backend, scope, [op])
            return value

        return backend.call(commit)

    def _page(
        self, view: MessageView, order: MessageOrder, **bounds: Any
    ) -> Page[LifecycleMessage]:
        return read_page(self._backend, self._scope, view=view, order=order, **bounds)


class _ReadMessages(_Client):
    """``thread.messages`` without visibility writes (the resolver's, LC-049)."""

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
        bounds = {"before_message_id": before_message_id, "after_message_id": after_message_id}
        return self._backend.call(
            lambda: self._page(view, order, **bounds, limit=limit, page_token=page_token)
        )

    def get(self, message_id: str) -> Awaitable[LifecycleMessage | None]:
        return self._backend.call(
            lambda: self._backend.get_many(self._scope, [message_id]).get(message_id)
        )

    def get_many(self, message_ids: Sequence[str]) -> Awaitable[builtins.list[LifecycleMessage]]:
        ids = builtins.list(message_ids)

        def read() -> builtins.list[LifecycleMessage]:
            found = self._backend.get_many(self._scope, ids)
            return [found[i] for i in ids if i in found]

        return self._backend.call(read)

    def append(
        self,
        *,
        role: Literal["system", "user", "assistant"],
        parts: Sequence[UIMessagePart],
        visibility: Mapping[str, bool] | MessageVisibility | None = None,
        metadata: Mapping[str, Any] | None = None,
        private_metadata: Mapping[str, Any] | None = None,
    ) -> Awaitable[LifecycleMessage]:
        message = new_lifecycle_message(
            role,
            parts,
            visibility=visibility,
            metadata=metadata,
            private_metadata=private_metadata,
            schemas=self._scope.message_schemas,
        )

        def op(write: StagedWrite) -> None:
            write.appended.append(message)

        return self._write(op, message)


class _Messages(_ReadMessages):
    def update_visibility(
        self,
        message_ids: Sequence[str],
        *,
        transcript: bool | None = None,
        context: bool | None = None,
    ) -> Awaitable[None]:
        change = {
            k: v for k, v in (("transcript", transcript), ("context", context)) if v is not None
        }
        ids = builtins.list(message_ids)
        backend, scope = self._backend, self._scope

        def op(write: StagedWrite) -> None:
            appended = {m.id: i for i, m in enumerate(write.appended)}
            stored = backend.get_many(scope, [i for i in ids if i not in appended])
            for message_id in ids:
                if message_id in appended:  # appended in this commit: stored as changed
                    index = appended[message_id]
                    message = write.appended[index]
                    visibility = partial_visibility(message.visibility, change)
                    write.appended[index] = with_visibility(message, visibility)
                    continue
                if message_id not in stored:
                    raise InvalidLifecycleWrite(f"message {message_id!r} is not in this thread")
                current = write.before.setdefault(message_id, stored[message_id].visibility)
                before = write.visibility.get(message_id, current)
                write.visibility[message_id] = partial_visibility(before, change)

        return self._write(op, None)


class _ThreadMetadata(_Client):
    """``thread.private_metadata`` / ``thread.metadata``."""

    def __init__(
        self,
        backend: LifecycleBackend,
        scope: ThreadScope,
        which: Bag,
        staged: list[StagedOp] | None,
    ) -> None:
        super().__init__(backend, scope, staged)
        self._which: Bag = which
        schemas = scope.thread_schemas
        self._schema: SchemaLike | None = None if schemas is None else getattr(schemas, which)

    def get(self) -> Awaitable[Mapping[str, Any]]:
        return self._backend.call(lambda: self._backend.thread_bag(self._scope, self._which))

    def merge(self, patch: Mapping[str, Any]) -> Awaitable[None]:
        return self._update(lambda current, what: merged_bag(self._schema, current, patch, what))

    def replace(self, value: Mapping[str, Any]) -> Awaitable[None]:
        return self._update(lambda current, what: validated_bag(self._schema, value, what))

    def _update(self, change: Callable[[JsonObject, str], JsonObject]) -> Awaitable[None]:
        which, what = self._which, f"thread {self._which} metadata"

        def op(write: StagedWrite) -> None:
            setattr(write, which, change(getattr(write, which), what))

        return self._write(op, None)


class _Context(_Client):
    """``thread.context``: the model-context view, with its provider projection."""

    def messages(
        self,
        *,
        before_message_id: str | None = None,
        after_message_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> Awaitable[Page[LifecycleMessage]]:
        bounds = {"before_message_id": before_message_id, "after_message_id": after_message_id}
        return self._backend.call(
            lambda: self._page("context", "asc", **bounds, limit=limit, page_token=page_token)
        )

    def current(
        self,
        *,
        before_message_id: str | None = None,
        after_message_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> Awaitable[ContextProjection]:
        bounds = {"before_message_id": before_message_id, "after_message_id": after_message_id}

        def read() -> ContextProjection:
            page = self._page("context", "asc", **bounds, limit=limit, page_token=page_token)
            return ContextProjection(
                messages=page.items,
                model_messages=tuple(to_model_messages([m.to_ui_message() for m in page.items])),
                next_page_token=page.next_page_token,
            )

        return self._backend.call(read)


class _Clients:
    """The four clients of a thread facade or of its transaction."""

    def __init__(
        self,
        backend: LifecycleBackend,
        scope: ThreadScope,
        staged: list[StagedOp] | None,
        *,
        resolver: bool,
    ) -> None:
        self.messages = (_ReadMessages if resolver else _Messages)(backend, scope, staged)
        self.private_metadata = _ThreadMetadata(backend, scope, "private", staged)
        self.metadata = _ThreadMetadata(backend, scope, "public", staged)
        self.context = _Context(backend, scope, None)


class LifecycleThreadFacade(_Clients):
    """:class:`~pai_agents.lifecycle.facade.LifecycleThread` (or, with ``resolver=True``,
    :class:`~pai_agents.lifecycle.facade.ResolverThread`, without visibility writes)."""

    def __init__(
        self, backend: LifecycleBackend, scope: ThreadScope, *, resolver: bool = False
    ) -> None:
        super().__init__(backend, scope, None, resolver=resolver)
        self._backend = backend
        self._scope = scope
        self._resolver = resolver

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
        """Run ``fn(tx)``, then commit what it staged together (or nothing if it raised)."""
        staged: list[StagedOp] = []
        tx = _Clients(self._backend, self._scope, staged, resolver=self._resolver)
        result: T = await call_user(fn, tx)
        backend, scope = self._backend, self._scope
        await backend.call(
            lambda: commit_staged(
                backend,
                scope,
                staged,
                expected_version=expected_version,
                expected_private=expected_private_metadata,
            )
        )
        return result


class RunMetadataFacade:
    """``run.private_metadata`` / ``run.metadata``: fenced by the run's owner (LC-033)."""

    def __init__(
        self,
        backend: LifecycleBackend,
        lease: LeaseLike,
        which: Bag,
        schemas: MetadataSchemas | None = None,
    ) -> None:
        self._backend = backend
        self._lease = lease
        self._which: Bag = which
        self._schema: SchemaLike | None = None if schemas is None else getattr(schemas, which)

    def get(self) -> Awaitable[Mapping[str, Any]]:
        return self._backend.call(lambda: self._backend.run_bag(self._lease, self._which))

    def merge(self, patch: Mapping[str, Any]) -> Awaitable[Mapping[str, Any]]:
        """Merge ``patch`` into the bag and return the whole merged bag."""
        backend, lease, which = self._backend, self._lease, self._which

        def write() -> Mapping[str, Any]:
            with backend.atomic():
                backend.fence(lease)
                current = backend.run_bag(lease, which)
                merged = merged_bag(self._schema, current, patch, f"run {which} metadata")
                backend.write_run_bag(lease, which, merged)
            return copy.deepcopy(merged)

        return backend.call(write)
