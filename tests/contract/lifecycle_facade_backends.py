"""The three backends of the lifecycle facade contract, behind one small harness.

A case talks to the facade only; setting the scene (a thread with a claimed run, a takeover
by another worker, an unrelated revision) and reading back what was stored go through a
:class:`Backend`: the reference store's helpers, the engine's in-memory store, or
``pai_threads``' services and models on whatever database the run uses.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

import pytest
from django.utils import timezone

from pai_agents.engine.memory import InMemoryThreadStore
from pai_agents.engine.store import Lease
from pai_agents.ids import new_id
from pai_agents.lifecycle.memory import InMemoryLifecycleStore
from pai_agents.messages.types import UIMessage
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Thread
from pai_threads.store.db import run_db_closing
from pai_threads.store.thread_store import ORMThreadStore

__all__ = ["ORM_DB", "SCOPE", "Backend", "MemoryBackend", "ORMBackend", "ReferenceBackend"]

T = TypeVar("T")
SCOPE = "user:alice"
AGENT = "assistant"  # the demo site's agent (the ORM thread's registered agent)
LEASE_SECONDS = 30.0
ORM_DB = pytest.mark.django_db(transaction=True)  # the facade writes from database threads

Stored = tuple[str, bool, bool]  # (message id, in transcript, in context), in thread order


class Backend(Protocol):
    name: str

    async def start(self) -> tuple[str, Any]:
        """A new thread with one user message and a run a worker claimed: (thread, lease)."""
        ...

    def thread(self, lease: Any, *, resolver: bool = False, schemas: Any = None) -> Any: ...

    def run_metadata(self, lease: Any, *, schemas: Any = None) -> tuple[Any, Any]: ...

    async def take_over(self, lease: Any) -> Any:
        """The lease runs out and another worker claims the run: its new lease."""
        ...

    async def unrelated_revision(self, lease: Any) -> None:
        """Something that is not thread private metadata changes (a heartbeat, LC-039)."""
        ...

    async def stored(self, thread_id: str) -> list[Stored]: ...

    async def state(self, thread_id: str, lease: Any) -> dict[str, Any]:
        """Thread bags and version, run bags: everything a facade write could change."""
        ...


def _user(text: str) -> UIMessage:
    return UIMessage(id=new_id("msg"), role="user", parts=[{"type": "text", "text": text}])


class ReferenceBackend:
    name = "reference"

    def __init__(self) -> None:
        self.store = InMemoryLifecycleStore()

    async def start(self) -> tuple[str, Any]:
        thread_id = self.store.create_thread(SCOPE)
        self.store.seed_message(
            SCOPE, thread_id, role="user", parts=[{"type": "text", "text": "hi"}]
        )
        return thread_id, (thread_id, self.store.start_run(SCOPE, thread_id))

    def thread(self, lease: Any, *, resolver: bool = False, schemas: Any = None) -> Any:
        thread_id, ref = lease
        return self.store.facade(SCOPE, thread_id, ref, resolver=resolver, schemas=schemas)

    def run_metadata(self, lease: Any, *, schemas: Any = None) -> tuple[Any, Any]:
        return self.store.run_metadata_clients(lease[1], schemas=schemas)

    async def take_over(self, lease: Any) -> Any:
        return lease[0], self.store.take_over(lease[1].run_id)

    async def unrelated_revision(self, lease: Any) -> None:
        self.store.touch(SCOPE, lease[0])

    async def stored(self, thread_id: str) -> list[Stored]:
        messages = self.store.stored_messages(SCOPE, thread_id)
        return [(m.id, m.visibility.transcript, m.visibility.context) for m in messages]

    async def state(self, thread_id: str, lease: Any) -> dict[str, Any]:
        thread, run = self.store.thread_bags(SCOPE, thread_id), self.store.run_bags(lease[1].run_id)
        return {
            "thread": (thread.private, thread.public),
            "version": self.store.thread_version(SCOPE, thread_id),
            "run": (run.private, run.public),
        }


class MemoryBackend:
    name = "memory"

    def __init__(self) -> None:
        self.store = InMemoryThreadStore()

    async def start(self) -> tuple[str, Lease]:
        thread_id = self.store.create_thread(scope_key=SCOPE, agent_name=AGENT)
        run_id = self.store.send(thread_id, _user("hi"))
        claim = await self.store.claim_run(run_id, owner="w1", lease_seconds=LEASE_SECONDS)
        return thread_id, claim.lease

    def thread(self, lease: Lease, *, resolver: bool = False, schemas: Any = None) -> Any:
        return self.store.lifecycle_thread(lease, resolver=resolver, schemas=schemas)

    def run_metadata(self, lease: Lease, *, schemas: Any = None) -> tuple[Any, Any]:
        return self.store.lifecycle_run_metadata(lease, schemas=schemas)

    async def take_over(self, lease: Lease) -> Lease:
        past = datetime.now(UTC) - timedelta(seconds=1)
        self.store.runs[lease.run_id].lease_expires_at = past
        claim = await self.store.claim_run(lease.run_id, owner="w2", lease_seconds=LEASE_SECONDS)
        return claim.lease

    async def unrelated_revision(self, lease: Lease) -> None:
        await self.store.heartbeat(lease, lease_seconds=LEASE_SECONDS)

    async def stored(self, thread_id: str) -> list[Stored]:
        extras = self.store.lifecycle.extras
        return [
            (m.message["id"], extras.get(m.message["id"], (True, {}))[0], m.context)
            for m in self.store.messages
            if m.thread_id == thread_id
        ]

    async def state(self, thread_id: str, lease: Lease) -> dict[str, Any]:
        backend = self.store.lifecycle
        thread, run = backend.thread_bags(SCOPE, thread_id), backend.run_bags(lease.run_id)
        return {
            "thread": (thread.private, thread.public),
            "version": backend.thread_version(SCOPE, thread_id),
            "run": (run.private, run.public),
        }


async def _db(fn: Callable[[], T]) -> T:
    return await run_db_closing(fn)


class ORMBackend:
    name = "orm"

    identity = Identity(scope_key=SCOPE, data={"userId": "alice"})

    async def start(self) -> tuple[str, Lease]:
        def create() -> tuple[str, str]:
            thread = services.create_thread(self.identity, agent=AGENT)
            sent = services.send(self.identity, thread.id, _user("hi"), dispatch=False)
            assert sent.run is not None
            return thread.id, sent.run.id

        thread_id, run_id = await _db(create)
        claim = await ORMThreadStore().claim_run(run_id, owner="w1", lease_seconds=LEASE_SECONDS)
        return thread_id, claim.lease

    def thread(self, lease: Lease, *, resolver: bool = False, schemas: Any = None) -> Any:
        return ORMThreadStore().lifecycle_thread(lease, resolver=resolver, schemas=schemas)

    def run_metadata(self, lease: Lease, *, schemas: Any = None) -> tuple[Any, Any]:
        return ORMThreadStore().lifecycle_run_metadata(lease, schemas=schemas)

    async def take_over(self, lease: Lease) -> Lease:
        past = timezone.now() - timedelta(seconds=1)
        await _db(lambda: Run.objects.filter(id=lease.run_id).update(lease_expires_at=past))
        store = ORMThreadStore()
        claim = await store.claim_run(lease.run_id, owner="w2", lease_seconds=LEASE_SECONDS)
        return claim.lease

    async def unrelated_revision(self, lease: Lease) -> None:
        await ORMThreadStore().heartbeat(lease, lease_seconds=LEASE_SECONDS)

    async def stored(self, thread_id: str) -> list[Stored]:
        rows = Message.objects.filter(thread_id=thread_id, status=Message.Status.COMMITTED)
        columns = ("message_id", "in_transcript", "in_context")
        return await _db(lambda: list(rows.order_by("id").values_list(*columns)))

    async def state(self, thread_id: str, lease: Lease) -> dict[str, Any]:
        def read() -> dict[str, Any]:
            thread, run = Thread.objects.get(id=thread_id), Run.objects.get(id=lease.run_id)
            return {
                "thread": (thread.private_metadata, thread.metadata),
                "version": thread.version,
                "run": (run.private_metadata, run.metadata),
            }

        return await _db(read)
