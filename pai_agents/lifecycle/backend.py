"""What a store must implement for the lifecycle ``thread`` facade (LC-003).

The facade (:mod:`.thread_facade`: message pages, metadata bags, context, staged ``mutate``
with compare-and-set, run metadata, lease fencing of every write) is written once over
:class:`LifecycleBackend`. A backend only stores, reads and fences; it never validates a
write, builds a page token or decides what a commit contains. Two backends implement it:
:class:`~pai_agents.lifecycle.memory.InMemoryLifecycleStore` (also under the engine's
in-memory store, :mod:`pai_agents.engine.memory_lifecycle`) and the ORM's
``pai_threads.lifecycle_store``.

Every method except :meth:`LifecycleBackend.call` is synchronous. The facade composes them
into one sync function per client call and hands it to ``call``, which runs it at once
(in-memory: reads and writes never wait) or on a database thread (ORM), so a facade call
costs one thread hop at most and a commit is one database transaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Generator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, NamedTuple, Protocol, TypeAlias, TypeVar

from pai_agents.json import JsonObject
from pai_agents.lifecycle.facade import LifecycleMessage, MessageView, MessageVisibility
from pai_agents.lifecycle.metadata import MetadataSchemas

__all__ = [
    "Bag",
    "LeaseLike",
    "LifecycleBackend",
    "PageQuery",
    "PositionedMessage",
    "Ready",
    "StagedWrite",
    "ThreadHead",
    "ThreadScope",
]

T = TypeVar("T")
Bag: TypeAlias = Literal["private", "public"]


class LeaseLike(Protocol):
    """The execution's claim as the facade sees it; the backend checks it in ``fence``."""

    @property
    def run_id(self) -> str: ...

    @property
    def token(self) -> int: ...


@dataclass(frozen=True, kw_only=True)
class ThreadScope:
    """One thread of one partition, written under one lease, with the schemas in force."""

    scope_key: str
    thread_id: str
    lease: LeaseLike
    thread_schemas: MetadataSchemas | None = None
    message_schemas: MetadataSchemas | None = None


@dataclass(frozen=True, kw_only=True)
class ThreadHead:
    """The thread row a commit starts from, read (and locked) inside the commit."""

    version: int
    private: JsonObject
    public: JsonObject
    handle: Any = None  # the backend's own row, handed back to ``persist``


@dataclass(kw_only=True)
class StagedWrite:
    """What one commit writes: built by the facade's staged operations on copies of the
    head's bags, persisted by the backend only once every operation passed (LC-036)."""

    private: JsonObject
    public: JsonObject
    appended: list[LifecycleMessage] = field(default_factory=list)
    # Stored messages whose visibility changes: the new visibility, and the stored one.
    visibility: dict[str, MessageVisibility] = field(default_factory=dict)
    before: dict[str, MessageVisibility] = field(default_factory=dict)


class PositionedMessage(NamedTuple):
    """A stored message with its position: increasing in append order, the page cursor."""

    position: int
    message: LifecycleMessage


@dataclass(frozen=True, kw_only=True)
class PageQuery:
    """Committed messages in ``view`` with ``above < position < below`` (a missing bound is
    open), in position order (reversed when ``descending``), at most ``limit`` of them."""

    view: MessageView
    descending: bool
    above: int | None
    below: int | None
    limit: int


class Ready(Awaitable[T], Generic[T]):
    """An awaitable whose value is already known (a staged write, an in-memory read).

    Sync hooks may call facade methods without awaiting them when the value is ready."""

    __slots__ = ("_value",)

    def __init__(self, value: T) -> None:
        self._value = value

    def __await__(self) -> Generator[Any, None, T]:
        if False:  # pragma: no cover - makes this a generator
            yield
        return self._value


class LifecycleBackend(Protocol):
    """The storage under the facade: page, get many, read a bag, commit, fence."""

    #: The most messages one page holds, whatever limit the caller asks for (LC-022).
    max_page_size: int

    def call(self, fn: Callable[[], T]) -> Awaitable[T]:
        """Run the sync ``fn`` (built from the methods below) where this backend does I/O."""
        ...

    # -- reads (partition and thread scoped, LC-004) --

    def positions(self, scope: ThreadScope, message_ids: Collection[str]) -> Mapping[str, int]:
        """The position of each of ``message_ids`` stored in the thread (others absent)."""
        ...

    def page(self, scope: ThreadScope, query: PageQuery) -> Sequence[PositionedMessage]:
        """Up to ``query.limit`` committed messages of the query, in its order."""
        ...

    def get_many(
        self, scope: ThreadScope, message_ids: Collection[str]
    ) -> Mapping[str, LifecycleMessage]:
        """The thread's messages among ``message_ids``, by id (unknown ids absent)."""
        ...

    def thread_bag(self, scope: ThreadScope, which: Bag) -> JsonObject:
        """The thread's private or public metadata as stored (a copy)."""
        ...

    def run_bag(self, lease: LeaseLike, which: Bag) -> JsonObject:
        """The leased run's private or public metadata as stored (a copy)."""
        ...

    # -- writes: only inside ``atomic()``, after ``fence`` --

    def atomic(self) -> AbstractContextManager[Any]:
        """One transaction: everything inside commits together or not at all."""
        ...

    def fence(self, lease: LeaseLike) -> None:
        """Raise :class:`~pai_agents.engine.store.LeaseLost` unless ``lease`` still owns its
        running run (the check holds until the transaction ends, LC-032)."""
        ...

    def lock_thread(self, scope: ThreadScope) -> ThreadHead:
        """The thread's head, locked against other commits until the transaction ends;
        ``LeaseLost`` if the lease's run belongs to another thread."""
        ...

    def persist(self, scope: ThreadScope, head: ThreadHead, write: StagedWrite) -> None:
        """Store ``write`` and bump the thread version once; after the transaction commits,
        tell clients about its public changes only (LC-029..LC-031)."""
        ...

    def write_run_bag(self, lease: LeaseLike, which: Bag, value: JsonObject) -> None:
        """Store the run's bag; a public one is told to clients once committed (LC-033)."""
        ...
