"""The ``thread`` facade hooks get: a scoped, lease-fenced, lazy view of one thread (LC-003).

It is not the store. It offers ``thread_id``, ``messages``, ``private_metadata``,
``metadata``, ``context`` and ``mutate`` and nothing else: no way to open another thread,
drop the partition filter or reach backend-specific storage. Every write is conditional on
the current execution's lease and raises :class:`~pai_agents.engine.store.LeaseLost`,
writing nothing, once the run is waiting, terminal or owned by another worker (LC-032).

Reads are explicit and paginated with opaque page tokens; repeat the same view, order and
bounds with each token (LC-021..LC-023). The resolver phase gets :class:`ResolverThread`,
whose message clients have no ``update_visibility`` (LC-049).
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeAlias, TypeVar

from pai_agents.messages.types import MessageRole, UIMessage, UIMessagePart
from pai_agents.models.base import ModelMessage

__all__ = [
    "ContextProjection",
    "InvalidLifecycleWrite",
    "LifecycleMessage",
    "LifecycleThread",
    "LifecycleThreadTransaction",
    "MessageOrder",
    "MessageView",
    "MessageVisibility",
    "MetadataClient",
    "MutationConflict",
    "Page",
    "ReadMessageClient",
    "ResolverThread",
    "ResolverThreadTransaction",
    "RunMetadataClient",
    "ThreadContextClient",
    "ThreadMessageClient",
    "ThreadMetadataClient",
]

MessageView: TypeAlias = Literal["context", "transcript", "all"]
MessageOrder: TypeAlias = Literal["asc", "desc"]
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class MessageVisibility:
    """Where a message shows: the transcript (clients) and/or the model context."""

    transcript: bool = True
    context: bool = True


@dataclass(frozen=True, kw_only=True)
class LifecycleMessage:
    """The trusted durable message: native id, role, metadata and parts, plus the two
    server-only facts ``visibility`` and ``private_metadata`` (LC-017)."""

    id: str
    role: MessageRole
    parts: tuple[UIMessagePart, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)
    visibility: MessageVisibility = field(default_factory=MessageVisibility)
    private_metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_ui_message(self) -> UIMessage:
        """The native/client shape: never carries visibility or private metadata."""
        message: UIMessage = {"id": self.id, "role": self.role, "parts": list(self.parts)}
        if self.metadata:
            message["metadata"] = dict(self.metadata)
        return message


@dataclass(frozen=True, kw_only=True)
class Page(Generic[T]):
    """One page; only a missing ``next_page_token`` marks the end (LC-022)."""

    items: tuple[T, ...]
    next_page_token: str | None = None


@dataclass(frozen=True, kw_only=True)
class ContextProjection:
    """``context.current()``: durable messages and the model input made from them (LC-018)."""

    messages: tuple[LifecycleMessage, ...]
    model_messages: tuple[ModelMessage, ...]
    next_page_token: str | None = None


class ReadMessageClient(Protocol):
    """Message reads, scoped to the facade's thread and partition (LC-004)."""

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
        """One page of messages in position order; ``limit`` may be capped (LC-016, LC-022)."""
        ...

    def get(self, message_id: str) -> Awaitable[LifecycleMessage | None]:
        """The message, or None when unknown or outside this thread (LC-004, LC-015)."""
        ...

    def get_many(self, message_ids: Sequence[str]) -> Awaitable[builtins.list[LifecycleMessage]]:
        """The messages that exist in this thread, in the order asked for."""
        ...

    def append(
        self,
        *,
        role: Literal["system", "user", "assistant"],
        parts: Sequence[UIMessagePart],
        visibility: Mapping[str, bool] | MessageVisibility | None = None,
        metadata: Mapping[str, Any] | None = None,
        private_metadata: Mapping[str, Any] | None = None,
    ) -> Awaitable[LifecycleMessage]:
        """Append a message with native, contract-neutral parts (LC-011..LC-013)."""
        ...


class ThreadMessageClient(ReadMessageClient, Protocol):
    """Message client of every phase except resolve_model_context."""

    def update_visibility(
        self,
        message_ids: Sequence[str],
        *,
        transcript: bool | None = None,
        context: bool | None = None,
    ) -> Awaitable[None]:
        """Set only the supplied visibility keys (LC-013); fires the visibility rewrite."""
        ...


class MutationConflict(RuntimeError):
    """A fenced compare-and-set (``expected_version`` / ``expected_private_metadata``) failed."""


class InvalidLifecycleWrite(ValueError):
    """A facade write was refused before anything was stored (bad role, part or metadata)."""


class MetadataClient(Protocol):
    def get(self) -> Awaitable[Mapping[str, Any]]:
        """The current bag (validated, strict JSON)."""
        ...


class ThreadMetadataClient(MetadataClient, Protocol):
    """Thread private or public metadata: shallow merge, whole-object validation."""

    def merge(self, patch: Mapping[str, Any]) -> Awaitable[None]:
        """Add or replace top-level keys; the merged bag is validated (LC-024, LC-025)."""
        ...

    def replace(self, value: Mapping[str, Any]) -> Awaitable[None]:
        """Swap the whole bag after validation; absent keys disappear (LC-027)."""
        ...


class RunMetadataClient(MetadataClient, Protocol):
    """Run private or public metadata, fenced by the run owner (LC-033)."""

    def merge(self, patch: Mapping[str, Any]) -> Awaitable[Mapping[str, Any]]:
        """Shallow merge, validate, commit; returns the new bag (LC-027)."""
        ...


class ThreadContextClient(Protocol):
    def current(
        self,
        *,
        before_message_id: str | None = None,
        after_message_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> Awaitable[ContextProjection]:
        """A page of the context view plus its model messages (LC-018)."""
        ...

    def messages(
        self,
        *,
        before_message_id: str | None = None,
        after_message_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> Awaitable[Page[LifecycleMessage]]:
        """The same context-view pages, messages only."""
        ...


class ResolverThreadTransaction(Protocol):
    """``tx`` inside mutate() during resolve_model_context: no visibility writes."""

    @property
    def messages(self) -> ReadMessageClient: ...
    @property
    def private_metadata(self) -> ThreadMetadataClient: ...
    @property
    def metadata(self) -> ThreadMetadataClient: ...
    @property
    def context(self) -> ThreadContextClient: ...


class LifecycleThreadTransaction(ResolverThreadTransaction, Protocol):
    """``tx``: writes are staged and committed together; reads see persisted state only."""

    @property
    def messages(self) -> ThreadMessageClient: ...


class ResolverThread(Protocol):
    """The facade of resolve_model_context: reads, appends and metadata, no visibility."""

    @property
    def thread_id(self) -> str: ...
    @property
    def messages(self) -> ReadMessageClient: ...
    @property
    def private_metadata(self) -> ThreadMetadataClient: ...
    @property
    def metadata(self) -> ThreadMetadataClient: ...
    @property
    def context(self) -> ThreadContextClient: ...

    def mutate(
        self,
        fn: Callable[[Any], T | Awaitable[T]],
        *,
        expected_version: int | None = None,
        expected_private_metadata: Mapping[str, Any] | None = None,
    ) -> Awaitable[T]:
        """Stage the writes ``fn(tx)`` makes and commit them atomically after it returns.

        Nothing is written if ``fn`` raises (LC-036), if ``expected_version`` is stale
        (LC-038) or if the thread's private metadata differs from
        ``expected_private_metadata`` (LC-039); the rejection raises
        :class:`MutationConflict`.
        """
        ...


class LifecycleThread(ResolverThread, Protocol):
    """The facade of every other phase."""

    @property
    def messages(self) -> ThreadMessageClient: ...
