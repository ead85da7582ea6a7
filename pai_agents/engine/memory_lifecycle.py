"""The lifecycle facade of :class:`~pai_agents.engine.memory.InMemoryThreadStore`.

It is the reference backend :class:`~pai_agents.lifecycle.memory.InMemoryLifecycleStore`
(scoping, fencing, staged ``mutate``, pages, metadata validation, all in the one facade of
:mod:`pai_agents.lifecycle.thread_facade`) over the engine store's own threads, runs and
messages, so hooks in engine tests read and write the very rows the engine commits, fenced
by the engine's lease tokens.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from pai_agents.engine.store import Lease, LeaseLost
from pai_agents.lifecycle.backend import LeaseLike
from pai_agents.lifecycle.facade import LifecycleMessage, MessageVisibility, RunMetadataClient
from pai_agents.lifecycle.memory import (
    InMemoryLifecycleStore,
    LeaseRef,
    MessageRecord,
    RunRecord,
    ThreadRecord,
)
from pai_agents.lifecycle.metadata import AgentMetadataSchemas, MetadataBags
from pai_agents.lifecycle.thread_facade import LifecycleThreadFacade
from pai_agents.messages.types import UIMessage

__all__ = ["EngineLifecycleBackend", "EngineRows", "lease_holds"]


class EngineRows(Protocol):
    """What this backend reads and writes of the engine store."""

    threads: dict[str, dict[str, Any]]
    runs: dict[str, Any]  # run id -> MemoryRun (scope_key, thread_id, status, lease_token)
    messages: list[Any]  # MemoryMessage (message, thread_id, status, context, position)

    def append_lifecycle_message(
        self, thread_id: str, message: UIMessage, *, context: bool
    ) -> None:
        """Store a message a hook appended (no run, committed)."""
        ...


def lease_holds(run: Any, token: int, *, renewal: bool = False) -> bool:
    """The lease predicate: this execution's token, a running run, and a lease unexpired by
    the store's clock (LC-033: a write after expiry is refused even before a takeover).
    ``renewal`` (the heartbeat): an expired lease nobody took over may still be renewed."""
    return (
        run.lease_token == token
        and run.status == "running"
        and (renewal or run.lease_expires_at is not None)
        and (renewal or run.lease_expires_at > datetime.now(UTC))
    )


class _EngineRow:
    """A stored engine message seen as a lifecycle row; visibility writes go back to it."""

    def __init__(self, backend: EngineLifecycleBackend, stored: Any, scope: str) -> None:
        self._backend = backend
        self._stored = stored
        self.position = stored.position
        self.scope_key = scope
        self.thread_id = stored.thread_id

    @property
    def message(self) -> LifecycleMessage:
        stored = self._stored
        ui = stored.message
        transcript, private = self._backend.extras.get(ui["id"], (True, {}))
        return LifecycleMessage(
            id=ui["id"],
            role=ui["role"],
            parts=tuple(copy.deepcopy(ui["parts"])),
            metadata=copy.deepcopy(dict(ui.get("metadata") or {})),
            visibility=MessageVisibility(transcript=transcript, context=stored.context),
            private_metadata=copy.deepcopy(private),
        )

    @message.setter
    def message(self, value: LifecycleMessage) -> None:
        self._stored.context = value.visibility.context
        _, private = self._backend.extras.get(value.id, (True, {}))
        self._backend.extras[value.id] = (value.visibility.transcript, private)


class EngineLifecycleBackend(InMemoryLifecycleStore):
    """:class:`InMemoryLifecycleStore` whose rows and leases are the engine store's."""

    def __init__(self, store: EngineRows, **options: Any) -> None:
        super().__init__(**options)
        self.engine_store = store
        # message id -> (in transcript, private metadata): facts the engine rows lack.
        self.extras: dict[str, tuple[bool, dict[str, Any]]] = {}

    def facade_for(
        self,
        lease: Lease,
        *,
        resolver: bool = False,
        schemas: AgentMetadataSchemas | None = None,
    ) -> LifecycleThreadFacade:
        self._thread(lease.scope_key, lease.thread_id, schemas)
        return self.facade(
            lease.scope_key,
            lease.thread_id,
            LeaseRef(run_id=lease.run_id, token=lease.token),
            resolver=resolver,
            schemas=schemas,
        )

    def run_clients(
        self, lease: Lease, *, schemas: AgentMetadataSchemas | None = None
    ) -> tuple[RunMetadataClient, RunMetadataClient]:
        self._run_row(lease.run_id, schemas)
        private, public = self.run_metadata_clients(
            LeaseRef(run_id=lease.run_id, token=lease.token), schemas=schemas
        )
        return cast(RunMetadataClient, private), cast(RunMetadataClient, public)

    def run_bags(self, run_id: str) -> MetadataBags:
        self._run_row(run_id)
        return super().run_bags(run_id)

    # -- InMemoryLifecycleStore's storage, backed by the engine store --

    def _thread(
        self, scope_key: str, thread_id: str, schemas: AgentMetadataSchemas | None = None
    ) -> ThreadRecord:
        key = (scope_key, thread_id)
        if key not in self._threads:
            info = self.engine_store.threads.get(thread_id)
            if info is None or info["scope_key"] != scope_key:
                raise LookupError(thread_id)
            self.create_thread(scope_key, thread_id, schemas=schemas.thread if schemas else None)
        return self._threads[key]

    def _run_row(self, run_id: str, schemas: AgentMetadataSchemas | None = None) -> RunRecord:
        run = self.engine_store.runs[run_id]
        if run_id not in self._runs:
            self.start_run(
                run.scope_key, run.thread_id, run_id, schemas=schemas.run if schemas else None
            )
        cached = self._runs[run_id]
        cached.token, cached.status = run.lease_token, run.status
        return cached

    def _fence(self, lease: LeaseLike) -> RunRecord:
        run = self.engine_store.runs.get(lease.run_id)
        if run is None or not lease_holds(run, lease.token):
            raise LeaseLost(lease.run_id)
        return self._run_row(lease.run_id)

    def _thread_rows(self, scope_key: str, thread_id: str) -> list[MessageRecord]:
        info = self.engine_store.threads.get(thread_id)
        if info is None or info["scope_key"] != scope_key:
            return []
        rows = [
            _EngineRow(self, m, scope_key)
            for m in self.engine_store.messages
            if m.thread_id == thread_id and m.status == "committed"
        ]
        return cast(list[MessageRecord], rows)

    def _insert(self, thread: ThreadRecord, message: LifecycleMessage) -> None:
        self.extras[message.id] = (message.visibility.transcript, dict(message.private_metadata))
        self.engine_store.append_lifecycle_message(
            thread.thread_id,
            copy.deepcopy(message.to_ui_message()),
            context=message.visibility.context,
        )
