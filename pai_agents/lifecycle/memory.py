"""An in-memory lifecycle backend: the facade's executable description and a unit-test double.

It implements :class:`~pai_agents.lifecycle.backend.LifecycleBackend` with dicts under one
lock, under the one facade of :mod:`~pai_agents.lifecycle.thread_facade`: partition and
thread scoping (LC-004), lease fencing of every write (LC-032, LC-033), staged atomic
``mutate`` with compare-and-set (LC-035..LC-039), bounded pages (LC-021..LC-023) and
client-visible events only for public changes (LC-029..LC-031, in :attr:`events`).

Reads and writes here never wait, so every client method returns an already-completed
awaitable: ``await`` it as usual; sync hooks running in a worker thread may also call it.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pai_agents.engine.store import LeaseLost
from pai_agents.ids import new_id
from pai_agents.json import JsonObject
from pai_agents.lifecycle.backend import (
    Bag,
    LeaseLike,
    PageQuery,
    PositionedMessage,
    Ready,
    StagedWrite,
    ThreadHead,
    ThreadScope,
)
from pai_agents.lifecycle.facade import LifecycleMessage, MessageVisibility
from pai_agents.lifecycle.history import matches_view
from pai_agents.lifecycle.metadata import AgentMetadataSchemas, MetadataBags, MetadataSchemas
from pai_agents.lifecycle.thread_facade import LifecycleThreadFacade, RunMetadataFacade
from pai_agents.lifecycle.validation import (
    NATIVE_PART_TYPES,
    with_visibility,
)
from pai_agents.messages.types import UIMessagePart

__all__ = [
    "NATIVE_PART_TYPES",
    "InMemoryLifecycleStore",
    "InMemoryThreadFacade",
    "LeaseRef",
    "MessageRecord",
    "RunRecord",
    "ThreadRecord",
]

T = TypeVar("T")
# The facade on this backend (the name this module has always exported).
InMemoryThreadFacade = LifecycleThreadFacade


@dataclass(frozen=True, kw_only=True)
class LeaseRef:
    """The execution's claim: facade writes are conditional on this token."""

    run_id: str
    token: int


@dataclass(kw_only=True)
class ThreadRecord:
    """A stored thread: its metadata bags and version."""

    scope_key: str
    thread_id: str
    private: JsonObject
    public: JsonObject
    version: int = 0


@dataclass(kw_only=True)
class RunRecord:
    """A stored run: its thread, metadata bags and lease (status and fencing token)."""

    run_id: str
    scope_key: str
    thread_id: str
    private: JsonObject
    public: JsonObject
    status: str = "running"
    token: int = 1


@dataclass(kw_only=True)
class MessageRecord:
    """A stored message at its position."""

    position: int
    scope_key: str
    thread_id: str
    message: LifecycleMessage


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
        self._threads: dict[tuple[str, str], ThreadRecord] = {}
        self._runs: dict[str, RunRecord] = {}
        self._rows: list[MessageRecord] = []
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
        self._threads[(scope_key, thread_id)] = ThreadRecord(
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
        run = RunRecord(
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
        lease: LeaseLike,
        *,
        resolver: bool = False,
        schemas: AgentMetadataSchemas | None = None,
    ) -> LifecycleThreadFacade:
        """``schemas`` (the agent's) take precedence over the store-wide ones."""
        if (scope_key, thread_id) not in self._threads:
            raise LookupError(thread_id)
        scope = ThreadScope(
            scope_key=scope_key,
            thread_id=thread_id,
            lease=lease,
            thread_schemas=schemas.thread if schemas is not None else self.thread_schemas,
            message_schemas=(schemas.message if schemas is not None else None)
            or self.message_schemas,
        )
        return LifecycleThreadFacade(self, scope, resolver=resolver)

    def run_metadata_clients(
        self, lease: LeaseLike, *, schemas: AgentMetadataSchemas | None = None
    ) -> tuple[RunMetadataFacade, RunMetadataFacade]:
        """``(run.private_metadata, run.metadata)`` for the run ``lease`` claims."""
        run = schemas.run if schemas is not None else self.run_schemas
        return (
            RunMetadataFacade(self, lease, "private", run),
            RunMetadataFacade(self, lease, "public", run),
        )

    # -- the backend protocol (pai_agents.lifecycle.backend.LifecycleBackend) --

    def call(self, fn: Callable[[], T]) -> Awaitable[T]:
        return Ready(fn())

    def atomic(self) -> AbstractContextManager[Any]:
        return self._lock

    def fence(self, lease: LeaseLike) -> None:
        self._fence(lease)

    def lock_thread(self, scope: ThreadScope) -> ThreadHead:
        run = self._runs[scope.lease.run_id]
        if (run.scope_key, run.thread_id) != (scope.scope_key, scope.thread_id):
            raise LeaseLost(scope.lease.run_id)  # another thread's lease fences nothing here
        thread = self._threads[(scope.scope_key, scope.thread_id)]
        return ThreadHead(
            version=thread.version, private=thread.private, public=thread.public, handle=thread
        )

    def persist(self, scope: ThreadScope, head: ThreadHead, write: StagedWrite) -> None:
        thread: ThreadRecord = head.handle
        for message in write.appended:
            self._insert(thread, message)
        if write.visibility:
            rows = {r.message.id: r for r in self._thread_rows(scope.scope_key, scope.thread_id)}
            for message_id, visibility in write.visibility.items():
                row = rows[message_id]
                row.message = with_visibility(row.message, visibility)
        public_changed = write.public != thread.public
        thread.private, thread.public = write.private, write.public
        thread.version += 1
        if write.appended or write.visibility or public_changed:
            self.events.append(
                {
                    "type": "thread.head",
                    "threadId": thread.thread_id,
                    "version": thread.version,
                    "metadata": copy.deepcopy(thread.public),
                }
            )

    def positions(self, scope: ThreadScope, message_ids: Collection[str]) -> Mapping[str, int]:
        rows = self._scoped_rows(scope)
        return {r.message.id: r.position for r in rows if r.message.id in message_ids}

    def page(self, scope: ThreadScope, query: PageQuery) -> Sequence[PositionedMessage]:
        above, below = query.above, query.below
        bounded = [
            r
            for r in self._scoped_rows(scope)
            if (above is None or r.position > above) and (below is None or r.position < below)
        ]
        selected = [
            PositionedMessage(r.position, message)
            for r, message in ((r, r.message) for r in bounded)
            if matches_view(message, query.view)
        ]
        if query.descending:
            selected.reverse()
        return selected[: query.limit]

    def get_many(
        self, scope: ThreadScope, message_ids: Collection[str]
    ) -> Mapping[str, LifecycleMessage]:
        wanted = set(message_ids)
        messages = (r.message for r in self._scoped_rows(scope))
        return {m.id: m for m in messages if m.id in wanted}

    def thread_bag(self, scope: ThreadScope, which: Bag) -> JsonObject:
        bags = self.thread_bags(scope.scope_key, scope.thread_id)
        return bags.private if which == "private" else bags.public

    def run_bag(self, lease: LeaseLike, which: Bag) -> JsonObject:
        bags = self.run_bags(lease.run_id)
        return bags.private if which == "private" else bags.public

    def write_run_bag(self, lease: LeaseLike, which: Bag, value: JsonObject) -> None:
        run = self._runs[lease.run_id]
        if which == "private":
            run.private = value
            return
        run.public = value
        self.events.append(
            {"type": "run.metadata", "runId": run.run_id, "metadata": copy.deepcopy(value)}
        )

    # -- storage (what a subclass over other rows replaces) --

    def _fence(self, lease: LeaseLike) -> RunRecord:
        run = self._runs.get(lease.run_id)
        if run is None or run.token != lease.token or run.status != "running":
            raise LeaseLost(lease.run_id)
        return run

    def _scoped_rows(self, scope: ThreadScope) -> list[MessageRecord]:
        with self._lock:
            return self._thread_rows(scope.scope_key, scope.thread_id)

    def _thread_rows(self, scope_key: str, thread_id: str) -> list[MessageRecord]:
        return [r for r in self._rows if r.scope_key == scope_key and r.thread_id == thread_id]

    def _insert(self, thread: ThreadRecord, message: LifecycleMessage) -> None:
        self._position += 1
        self._rows.append(
            MessageRecord(
                position=self._position,
                scope_key=thread.scope_key,
                thread_id=thread.thread_id,
                message=message,
            )
        )
