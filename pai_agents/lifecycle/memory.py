"""An in-memory lifecycle backend: the facade's executable description and a unit-test double.

It enforces what a real backend must: partition and thread scoping (LC-004), lease
fencing of every write (LC-032, LC-033), staged atomic ``mutate`` with compare-and-set
(LC-035..LC-039), whole-object metadata validation (LC-025), bounded pages with opaque
tokens (LC-021..LC-023) and client-visible events only for public changes (LC-029..LC-031).

Reads and writes here never wait, so every client method returns an already-completed
awaitable: ``await`` it as usual; sync hooks running in a worker thread may also call it.
"""

from __future__ import annotations

import builtins
import copy
import threading
from collections.abc import Awaitable, Callable, Collection, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pai_agents._callables import call_user
from pai_agents.engine.store import LeaseLost
from pai_agents.ids import new_id
from pai_agents.json import JsonObject, NotStrictJson, ensure_strict_json
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
from pai_agents.lifecycle.history import matches_view
from pai_agents.lifecycle.metadata import (
    AgentMetadataSchemas,
    InvalidMetadata,
    MetadataBags,
    MetadataSchemas,
    SchemaLike,
    merge_metadata,
    replace_metadata,
)
from pai_agents.messages.model_messages import to_model_messages
from pai_agents.messages.types import UIMessagePart

__all__ = ["NATIVE_PART_TYPES", "InMemoryLifecycleStore", "InMemoryThreadFacade", "LeaseRef"]

T = TypeVar("T")
# Contract-neutral native parts lifecycle code may author (LC-012).
NATIVE_PART_TYPES = frozenset(
    {"text", "reasoning", "file", "source-url", "source-document", "step-start", "dynamic-tool"}
)
_ROLES = frozenset({"system", "user", "assistant"})


class _Ready(Generic[T]):
    """An awaitable whose value is already known."""

    __slots__ = ("_value",)

    def __init__(self, value: T) -> None:
        self._value = value

    def __await__(self) -> Generator[Any, None, T]:
        if False:  # pragma: no cover - makes this a generator
            yield
        return self._value


@dataclass(frozen=True, kw_only=True)
class LeaseRef:
    """The execution's claim: facade writes are conditional on this token."""

    run_id: str
    token: int


@dataclass(kw_only=True)
class _Thread:
    scope_key: str
    thread_id: str
    private: JsonObject
    public: JsonObject
    version: int = 0


@dataclass(kw_only=True)
class _Run:
    run_id: str
    scope_key: str
    thread_id: str
    private: JsonObject
    public: JsonObject
    status: str = "running"
    token: int = 1


@dataclass(kw_only=True)
class _Row:
    position: int
    scope_key: str
    thread_id: str
    message: LifecycleMessage


@dataclass(kw_only=True)
class _Work:
    """The staged result of one commit, built on copies; swapped in only if every op passed."""

    thread: _Thread
    private: JsonObject
    public: JsonObject
    visibility: dict[str, MessageVisibility] = field(default_factory=dict)
    appended: list[LifecycleMessage] = field(default_factory=list)


_Op = Callable[[_Work], None]


class InMemoryLifecycleStore:
    """Threads, messages, runs and their metadata, in dicts under one lock."""

    def __init__(
        self,
        *,
        thread_metadata: MetadataSchemas | None = None,
        run_metadata: MetadataSchemas | None = None,
        message_metadata: MetadataSchemas | None = None,
        registered_tools: Collection[str] = (),
        max_page_size: int = 50,
    ) -> None:
        self._lock = threading.RLock()
        self.thread_schemas = thread_metadata
        self.run_schemas = run_metadata
        self.message_schemas = message_metadata
        self.registered_tools = frozenset(registered_tools)
        self.max_page_size = max_page_size
        self._threads: dict[tuple[str, str], _Thread] = {}
        self._runs: dict[str, _Run] = {}
        self._rows: list[_Row] = []
        self._position = 0
        self.events: list[dict[str, Any]] = []  # what clients would be sent

    # -- trusted setup and inspection (tests, admin) --

    def create_thread(
        self,
        scope_key: str,
        thread_id: str | None = None,
        *,
        schemas: MetadataSchemas | None = None,
    ) -> str:
        schemas = schemas or self.thread_schemas
        bags = schemas.initial() if schemas else MetadataBags(private={}, public={})
        thread_id = thread_id or new_id("thr")
        self._threads[(scope_key, thread_id)] = _Thread(
            scope_key=scope_key, thread_id=thread_id, private=bags.private, public=bags.public
        )
        return thread_id

    def seed_message(
        self,
        scope_key: str,
        thread_id: str,
        *,
        role: Literal["system", "user", "assistant"],
        parts: Sequence[UIMessagePart],
        transcript: bool = True,
        context: bool = True,
    ) -> LifecycleMessage:
        """Append as the runtime would (no lease, any native part)."""
        message = LifecycleMessage(
            id=new_id("msg"),
            role=role,
            parts=tuple(copy.deepcopy(list(parts))),
            visibility=MessageVisibility(transcript=transcript, context=context),
        )
        with self._lock:
            thread = self._threads[(scope_key, thread_id)]
            self._insert(thread, message)
            thread.version += 1
        return message

    def start_run(
        self,
        scope_key: str,
        thread_id: str,
        run_id: str | None = None,
        *,
        schemas: MetadataSchemas | None = None,
    ) -> LeaseRef:
        """A running run whose metadata starts as the parsed ``{}`` (AD-031, AD-032)."""
        schemas = schemas or self.run_schemas
        bags = schemas.initial() if schemas else MetadataBags(private={}, public={})
        run = _Run(
            run_id=run_id or new_id("run"),
            scope_key=scope_key,
            thread_id=thread_id,
            private=bags.private,
            public=bags.public,
        )
        self._runs[run.run_id] = run
        return LeaseRef(run_id=run.run_id, token=run.token)

    def take_over(self, run_id: str) -> LeaseRef:
        """Another worker claims the run: the previous lease is lost."""
        with self._lock:
            run = self._runs[run_id]
            run.token += 1
            run.status = "running"
            return LeaseRef(run_id=run_id, token=run.token)

    def set_run_status(self, run_id: str, status: str) -> None:
        with self._lock:
            self._runs[run_id].status = status

    def touch(self, scope_key: str, thread_id: str) -> None:
        """An unrelated root revision (run status, usage, heartbeat)."""
        with self._lock:
            self._threads[(scope_key, thread_id)].version += 1

    def thread_version(self, scope_key: str, thread_id: str) -> int:
        return self._threads[(scope_key, thread_id)].version

    def thread_bags(self, scope_key: str, thread_id: str) -> MetadataBags:
        thread = self._threads[(scope_key, thread_id)]
        return MetadataBags(
            private=copy.deepcopy(thread.private), public=copy.deepcopy(thread.public)
        )

    def run_bags(self, run_id: str) -> MetadataBags:
        run = self._runs[run_id]
        return MetadataBags(private=copy.deepcopy(run.private), public=copy.deepcopy(run.public))

    def stored_messages(self, scope_key: str, thread_id: str) -> list[LifecycleMessage]:
        return [r.message for r in self._thread_rows(scope_key, thread_id)]

    def facade(
        self,
        scope_key: str,
        thread_id: str,
        lease: LeaseRef,
        *,
        resolver: bool = False,
        schemas: AgentMetadataSchemas | None = None,
    ) -> InMemoryThreadFacade:
        """``schemas`` (the agent's) take precedence over the store-wide ones."""
        if (scope_key, thread_id) not in self._threads:
            raise LookupError(thread_id)
        return InMemoryThreadFacade(
            _Scope(self, scope_key, thread_id, lease, schemas), resolver=resolver
        )

    def run_metadata_clients(
        self, lease: LeaseRef, *, schemas: AgentMetadataSchemas | None = None
    ) -> tuple[_RunMetadata, _RunMetadata]:
        """``(run.private_metadata, run.metadata)`` for the run ``lease`` claims."""
        run = schemas.run if schemas is not None else self.run_schemas
        return (
            _RunMetadata(self, lease, "private", run),
            _RunMetadata(self, lease, "public", run),
        )

    # -- internals --

    def _fence(self, lease: LeaseRef) -> _Run:
        run = self._runs.get(lease.run_id)
        if run is None or run.token != lease.token or run.status != "running":
            raise LeaseLost(lease.run_id)
        return run

    def _thread_rows(self, scope_key: str, thread_id: str) -> list[_Row]:
        return [r for r in self._rows if r.scope_key == scope_key and r.thread_id == thread_id]

    def _insert(self, thread: _Thread, message: LifecycleMessage) -> None:
        self._position += 1
        self._rows.append(
            _Row(
                position=self._position,
                scope_key=thread.scope_key,
                thread_id=thread.thread_id,
                message=message,
            )
        )

    def _commit(
        self,
        scope: _Scope,
        ops: Sequence[_Op],
        *,
        expected_version: int | None = None,
        expected_private: Mapping[str, Any] | None = None,
    ) -> None:
        with self._lock:
            run = self._fence(scope.lease)
            if (run.scope_key, run.thread_id) != (scope.scope_key, scope.thread_id):
                raise LeaseLost(scope.lease.run_id)
            thread = self._threads[(scope.scope_key, scope.thread_id)]
            if expected_version is not None and expected_version != thread.version:
                raise MutationConflict(
                    f"thread version is {thread.version}, expected {expected_version}"
                )
            if expected_private is not None and dict(expected_private) != thread.private:
                raise MutationConflict("thread private metadata changed")
            work = _Work(
                thread=thread,
                private=copy.deepcopy(thread.private),
                public=copy.deepcopy(thread.public),
            )
            for op in ops:
                op(work)  # raising here leaves the store untouched
            if not ops:
                return
            for message in work.appended:
                self._insert(thread, message)
            rows = {r.message.id: r for r in self._thread_rows(thread.scope_key, thread.thread_id)}
            for message_id, visibility in work.visibility.items():
                row = rows[message_id]
                row.message = _with_visibility(row.message, visibility)
            public_changed = work.public != thread.public
            thread.private, thread.public = work.private, work.public
            thread.version += 1
            if work.appended or work.visibility or public_changed:
                self.events.append(
                    {
                        "type": "thread.head",
                        "threadId": thread.thread_id,
                        "version": thread.version,
                        "metadata": copy.deepcopy(thread.public),
                    }
                )

    def _message_for(
        self,
        role: str,
        parts: Sequence[UIMessagePart],
        visibility: Mapping[str, bool] | MessageVisibility | None,
        metadata: Mapping[str, Any] | None,
        private_metadata: Mapping[str, Any] | None,
        schemas: MetadataSchemas | None = None,
    ) -> LifecycleMessage:
        if role not in _ROLES:
            raise InvalidLifecycleWrite(f"append() accepts system, user or assistant, not {role!r}")
        checked: list[UIMessagePart] = []
        for part in parts:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind not in NATIVE_PART_TYPES:
                raise InvalidLifecycleWrite(
                    f"append() accepts native contract-neutral parts only, not {kind!r}"
                    + (
                        " (write data parts through ui_data)"
                        if str(kind).startswith("data-")
                        else ""
                    )
                )
            try:
                checked.append(copy.deepcopy(ensure_strict_json(dict(part), what="part")))  # type: ignore[arg-type]
            except NotStrictJson as exc:
                raise InvalidLifecycleWrite(str(exc)) from exc
        schemas = schemas or self.message_schemas
        try:
            public = _bag(schemas.public if schemas else None, metadata or {}, "message metadata")
            private = _bag(
                schemas.private if schemas else None, private_metadata or {}, "private metadata"
            )
        except InvalidMetadata as exc:
            raise InvalidLifecycleWrite(str(exc)) from exc
        if "pai" in public:
            raise InvalidLifecycleWrite("metadata.pai is reserved for the runtime")
        return LifecycleMessage(
            id=new_id("msg"),
            role=role,  # type: ignore[arg-type]
            parts=tuple(checked),
            metadata=public,
            visibility=_partial_visibility(MessageVisibility(), visibility),
            private_metadata=private,
        )

    def _page(
        self,
        scope: _Scope,
        *,
        view: MessageView,
        order: MessageOrder,
        before_message_id: str | None,
        after_message_id: str | None,
        limit: int | None,
        page_token: str | None,
    ) -> Page[LifecycleMessage]:
        if view not in ("context", "transcript", "all") or order not in ("asc", "desc"):
            raise ValueError(f"bad query: view={view!r} order={order!r}")
        with self._lock:
            rows = self._thread_rows(scope.scope_key, scope.thread_id)
        positions = {r.message.id: r.position for r in rows}
        low, high = 0, None
        if after_message_id is not None:
            low = _position_of(positions, after_message_id)
        if before_message_id is not None:
            high = _position_of(positions, before_message_id)
        selected = [
            r
            for r in rows
            if r.position > low
            and (high is None or r.position < high)
            and matches_view(r.message, view)
        ]
        if order == "desc":
            selected.reverse()
        if page_token is not None:
            cursor = decode_page_token(page_token)
            selected = [
                r
                for r in selected
                if (r.position > cursor if order == "asc" else r.position < cursor)
            ]
        size = max(1, min(limit or self.max_page_size, self.max_page_size))
        page = selected[:size]
        token = encode_page_token(page[-1].position) if len(selected) > size else None
        return Page(items=tuple(r.message for r in page), next_page_token=token)


def _position_of(positions: Mapping[str, int], message_id: str) -> int:
    if message_id not in positions:
        raise LookupError(f"message {message_id!r} is not in this thread")
    return positions[message_id]


def _bag(schema: SchemaLike | None, value: Mapping[str, Any], what: str) -> JsonObject:
    if schema is not None:
        return replace_metadata(schema, value, what=what)
    try:
        checked = ensure_strict_json(copy.deepcopy(dict(value)), what=what)
    except NotStrictJson as exc:
        raise InvalidMetadata(str(exc)) from exc
    return checked  # type: ignore[return-value]


def _merged(
    schema: SchemaLike | None, current: JsonObject, patch: Mapping[str, Any], what: str
) -> JsonObject:
    if schema is not None:
        return merge_metadata(schema, current, patch, what=what)
    if not isinstance(patch, Mapping):
        raise InvalidMetadata(f"{what}: a metadata patch is a JSON object")
    return {**current, **_bag(None, patch, what)}


def _partial_visibility(
    current: MessageVisibility, change: Mapping[str, bool] | MessageVisibility | None
) -> MessageVisibility:
    if change is None:
        return current
    if isinstance(change, MessageVisibility):
        return change
    unknown = set(change) - {"transcript", "context"}
    if unknown:
        raise InvalidLifecycleWrite(f"visibility keys are transcript and context: {unknown}")
    return MessageVisibility(
        transcript=bool(change.get("transcript", current.transcript)),
        context=bool(change.get("context", current.context)),
    )


def _with_visibility(message: LifecycleMessage, visibility: MessageVisibility) -> LifecycleMessage:
    return LifecycleMessage(
        id=message.id,
        role=message.role,
        parts=message.parts,
        metadata=message.metadata,
        visibility=visibility,
        private_metadata=message.private_metadata,
    )


class _Scope:
    """One thread of one partition, written under one lease."""

    def __init__(
        self,
        store: InMemoryLifecycleStore,
        scope_key: str,
        thread_id: str,
        lease: LeaseRef,
        schemas: AgentMetadataSchemas | None = None,
    ) -> None:
        self.store = store
        self.scope_key = scope_key
        self.thread_id = thread_id
        self.lease = lease
        self.schemas = schemas

    @property
    def thread_schemas(self) -> MetadataSchemas | None:
        return self.schemas.thread if self.schemas is not None else self.store.thread_schemas

    @property
    def message_schemas(self) -> MetadataSchemas | None:
        return self.schemas.message if self.schemas is not None else self.store.message_schemas

    def write(self, op: _Op, staged: list[_Op] | None) -> None:
        if staged is not None:
            staged.append(op)  # committed by mutate() after its callback returns
        else:
            self.store._commit(self, [op])


class _ReadMessages:
    def __init__(self, scope: _Scope, staged: list[_Op] | None) -> None:
        self._scope = scope
        self._staged = staged

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
        return _Ready(
            self._scope.store._page(
                self._scope,
                view=view,
                order=order,
                before_message_id=before_message_id,
                after_message_id=after_message_id,
                limit=limit,
                page_token=page_token,
            )
        )

    def get(self, message_id: str) -> Awaitable[LifecycleMessage | None]:
        rows = self._scope.store._thread_rows(self._scope.scope_key, self._scope.thread_id)
        found = next((r.message for r in rows if r.message.id == message_id), None)
        return _Ready(found)

    def get_many(self, message_ids: Sequence[str]) -> Awaitable[builtins.list[LifecycleMessage]]:
        rows = self._scope.store._thread_rows(self._scope.scope_key, self._scope.thread_id)
        by_id = {r.message.id: r.message for r in rows}
        return _Ready([by_id[i] for i in message_ids if i in by_id])

    def append(
        self,
        *,
        role: Literal["system", "user", "assistant"],
        parts: Sequence[UIMessagePart],
        visibility: Mapping[str, bool] | MessageVisibility | None = None,
        metadata: Mapping[str, Any] | None = None,
        private_metadata: Mapping[str, Any] | None = None,
    ) -> Awaitable[LifecycleMessage]:
        message = self._scope.store._message_for(
            role, parts, visibility, metadata, private_metadata, self._scope.message_schemas
        )

        def op(work: _Work) -> None:
            work.appended.append(message)

        self._scope.write(op, self._staged)
        return _Ready(message)


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
        ids = list(message_ids)
        scope = self._scope

        def op(work: _Work) -> None:
            rows = scope.store._thread_rows(scope.scope_key, scope.thread_id)
            current = {r.message.id: r.message.visibility for r in rows}
            current.update({m.id: m.visibility for m in work.appended})
            for message_id in ids:
                if message_id not in current:
                    raise InvalidLifecycleWrite(f"message {message_id!r} is not in this thread")
                before = work.visibility.get(message_id, current[message_id])
                work.visibility[message_id] = _partial_visibility(before, change)

        scope.write(op, self._staged)
        return _Ready(None)


class _ThreadMetadata:
    def __init__(
        self, scope: _Scope, which: Literal["private", "public"], staged: list[_Op] | None
    ) -> None:
        self._scope = scope
        self._which = which
        self._staged = staged

    def _schema(self) -> SchemaLike | None:
        schemas = self._scope.thread_schemas
        return None if schemas is None else getattr(schemas, self._which)

    def get(self) -> Awaitable[Mapping[str, Any]]:
        bags = self._scope.store.thread_bags(self._scope.scope_key, self._scope.thread_id)
        return _Ready(bags.private if self._which == "private" else bags.public)

    def merge(self, patch: Mapping[str, Any]) -> Awaitable[None]:
        schema, which, what = self._schema(), self._which, f"thread {self._which} metadata"

        def op(work: _Work) -> None:
            setattr(work, which, _merged(schema, getattr(work, which), patch, what))

        self._scope.write(op, self._staged)
        return _Ready(None)

    def replace(self, value: Mapping[str, Any]) -> Awaitable[None]:
        schema, which, what = self._schema(), self._which, f"thread {self._which} metadata"

        def op(work: _Work) -> None:
            setattr(work, which, _bag(schema, value, what))

        self._scope.write(op, self._staged)
        return _Ready(None)


class _Context:
    def __init__(self, scope: _Scope) -> None:
        self._scope = scope

    def messages(
        self,
        *,
        before_message_id: str | None = None,
        after_message_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> Awaitable[Page[LifecycleMessage]]:
        return _ReadMessages(self._scope, None).list(
            view="context",
            order="asc",
            before_message_id=before_message_id,
            after_message_id=after_message_id,
            limit=limit,
            page_token=page_token,
        )

    def current(
        self,
        *,
        before_message_id: str | None = None,
        after_message_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> Awaitable[ContextProjection]:
        page = self._scope.store._page(
            self._scope,
            view="context",
            order="asc",
            before_message_id=before_message_id,
            after_message_id=after_message_id,
            limit=limit,
            page_token=page_token,
        )
        model_messages = to_model_messages([m.to_ui_message() for m in page.items])
        return _Ready(
            ContextProjection(
                messages=page.items,
                model_messages=tuple(model_messages),
                next_page_token=page.next_page_token,
            )
        )


class _Transaction:
    """``tx``: writes are staged; reads see persisted state only (LC-037)."""

    def __init__(self, scope: _Scope, staged: list[_Op], *, resolver: bool) -> None:
        self.messages = (_ReadMessages if resolver else _Messages)(scope, staged)
        self.private_metadata = _ThreadMetadata(scope, "private", staged)
        self.metadata = _ThreadMetadata(scope, "public", staged)
        self.context = _Context(scope)


class InMemoryThreadFacade:
    """:class:`~pai_agents.lifecycle.facade.LifecycleThread` (or, with ``resolver=True``,
    :class:`~pai_agents.lifecycle.facade.ResolverThread`, without visibility writes)."""

    def __init__(self, scope: _Scope, *, resolver: bool = False) -> None:
        self._scope = scope
        self._resolver = resolver
        self.messages = (_ReadMessages if resolver else _Messages)(scope, None)
        self.private_metadata = _ThreadMetadata(scope, "private", None)
        self.metadata = _ThreadMetadata(scope, "public", None)
        self.context = _Context(scope)

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
        result: T = await call_user(fn, _Transaction(self._scope, staged, resolver=self._resolver))
        self._scope.store._commit(
            self._scope,
            staged,
            expected_version=expected_version,
            expected_private=expected_private_metadata,
        )
        return result


class _RunMetadata:
    """``run.private_metadata`` / ``run.metadata``: fenced by the run's owner (LC-033)."""

    def __init__(
        self,
        store: InMemoryLifecycleStore,
        lease: LeaseRef,
        which: Literal["private", "public"],
        schemas: MetadataSchemas | None = None,
    ) -> None:
        self._store = store
        self._lease = lease
        self._which = which
        self._schemas = schemas

    def get(self) -> Awaitable[Mapping[str, Any]]:
        bags = self._store.run_bags(self._lease.run_id)
        return _Ready(bags.private if self._which == "private" else bags.public)

    def merge(self, patch: Mapping[str, Any]) -> Awaitable[Mapping[str, Any]]:
        schemas = self._schemas
        schema = None if schemas is None else getattr(schemas, self._which)
        with self._store._lock:
            run = self._store._fence(self._lease)
            current = run.private if self._which == "private" else run.public
            merged = _merged(schema, current, patch, f"run {self._which} metadata")
            if self._which == "private":
                run.private = merged
            else:
                run.public = merged
                self._store.events.append(
                    {"type": "run.metadata", "runId": run.run_id, "metadata": copy.deepcopy(merged)}
                )
        return _Ready(copy.deepcopy(merged))
