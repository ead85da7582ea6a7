"""What the store offers lifecycle hooks: the lease-fenced facade of the run's thread.

A store that implements :class:`LifecycleStore` gives hooks ``input.thread`` (messages and
metadata), the resolver's thread and the run's metadata bags, all bound to the lease and
typed by the agent's schemas. A store without it (a custom one) still runs every agent; a
hook that touches the facade then gets a clear ``NotImplementedError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from pai_agents.engine.store import Lease
from pai_agents.lifecycle.facade import LifecycleThread, ResolverThread, RunMetadataClient

__all__ = ["Facades", "LifecycleStore", "bind_facades"]


@runtime_checkable
class LifecycleStore(Protocol):
    """Optional store capability: the lease-fenced facade of the claimed run's thread."""

    def lifecycle_thread(
        self, lease: Lease, *, resolver: bool = False, schemas: Any = None
    ) -> LifecycleThread:
        """The facade bound to the lease's thread and partition; nothing is read yet.

        ``schemas`` (:class:`~pai_agents.lifecycle.metadata.AgentMetadataSchemas`) type
        every thread and message metadata write: the merged object is validated whole."""
        ...

    def lifecycle_run_metadata(
        self, lease: Lease, *, schemas: Any = None
    ) -> tuple[RunMetadataClient, RunMetadataClient]:
        """``(run.private_metadata, run.metadata)`` for the leased run (typed by
        ``schemas.run``)."""
        ...


class Unsupported:
    """Stands in for facade clients when the store has no lifecycle support."""

    def __init__(self, what: str) -> None:
        self._what = what

    def __getattr__(self, name: str) -> Any:
        raise NotImplementedError(f"this store does not support lifecycle {self._what}.{name}")


@dataclass(frozen=True)
class Facades:
    """The clients hooks receive; unsupported ones raise on first use."""

    thread: LifecycleThread
    resolver_thread: ResolverThread
    private_metadata: RunMetadataClient
    metadata: RunMetadataClient


def bind_facades(store: object, lease: Lease, *, schemas: Any, needed: bool) -> Facades:
    """The facades of ``lease``'s thread; unbound (and free) when no hook can use them."""
    if needed and isinstance(store, LifecycleStore):
        private, public = store.lifecycle_run_metadata(lease, schemas=schemas)
        return Facades(
            thread=store.lifecycle_thread(lease, schemas=schemas),
            resolver_thread=store.lifecycle_thread(lease, resolver=True, schemas=schemas),
            private_metadata=private,
            metadata=public,
        )
    thread = cast(LifecycleThread, Unsupported("thread"))
    return Facades(
        thread=thread,
        resolver_thread=cast(ResolverThread, thread),
        private_metadata=cast(RunMetadataClient, Unsupported("run.private_metadata")),
        metadata=cast(RunMetadataClient, Unsupported("run.metadata")),
    )
