"""The two ThreadStore backends of the contract suite, behind one small harness.

A contract case talks to a store only through the :class:`ThreadStore` protocol. What the
protocol leaves to the layer above (accepting input, answering actions, cancelling, the
passage of time) and what a case reads back to check a write goes through a
:class:`StoreBackend`: the in-memory store's own helpers, or ``pai_threads``' services and
models on whatever database the run uses (SQLite, or PostgreSQL with ``DATABASE_URL``).

Read-backs are normalised (:class:`RunView`, :class:`MessageView`) so one assertion holds
for both; :meth:`StoreBackend.snapshot` is everything a write could change, for "nothing
was written" checks.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from django.utils import timezone

from pai_agents.engine.memory import InMemoryThreadStore
from pai_agents.engine.store import ThreadStore
from pai_agents.messages.types import UIMessage
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, QueueItem, Run, Step
from pai_threads.store.db import run_db_closing
from pai_threads.store.thread_store import ORMThreadStore

__all__ = ["AGENT", "MemoryBackend", "MessageView", "ORMBackend", "RunView", "StoreBackend"]

T = TypeVar("T")
SCOPE = "user:alice"
AGENT = "assistant"  # the demo site's agent, registered for the ORM backend


@dataclass(frozen=True)
class RunView:
    """The run row as a case checks it."""

    status: str
    token: int
    attempt: int
    step_count: int
    owner: str
    usage: dict[str, Any]
    error: dict[str, Any] | None
    cancel_requested: bool


@dataclass(frozen=True)
class MessageView:
    """One stored message of a thread, in thread order."""

    id: str
    role: str
    status: str
    parts: list[Any]
    run_id: str | None
    step_index: int | None
    usage: dict[str, Any] | None


class StoreBackend(Protocol):
    name: str

    def worker(self) -> ThreadStore:
        """The store one worker executes with (the ORM store is one per execution)."""
        ...

    async def start_run(self, text: str = "hello") -> tuple[str, str]:
        """A new thread with a user message ``user-1`` and its queued run: (thread, run)."""
        ...

    async def steer(self, thread_id: str, message_id: str, text: str) -> None: ...

    async def approve(self, run_id: str, tool_call_id: str) -> None:
        """Answer the call's pending approval; the run is queued for its resume."""
        ...

    async def request_cancel(self, run_id: str) -> None: ...

    async def expire_lease(self, run_id: str) -> None:
        """Time passes: the run's lease ran out (its worker died or froze)."""
        ...

    async def run(self, run_id: str) -> RunView: ...

    async def messages(self, thread_id: str) -> list[MessageView]: ...

    async def steps(self, run_id: str) -> list[int]: ...

    async def actions(self, run_id: str) -> dict[str, str]: ...

    async def queued_steering(self, thread_id: str) -> list[str]: ...

    async def snapshot(self, thread_id: str, run_id: str) -> dict[str, Any]:
        """Everything a store write of this run could change (lease expiry included)."""
        ...


class MemoryBackend:
    name = "memory"

    def __init__(self) -> None:
        self.store = InMemoryThreadStore()

    def worker(self) -> ThreadStore:
        return self.store  # one process: every worker shares the dicts

    async def start_run(self, text: str = "hello") -> tuple[str, str]:
        thread_id = self.store.create_thread(scope_key=SCOPE, agent_name=AGENT)
        run_id = self.store.send(thread_id, _user("user-1", text))
        return thread_id, run_id

    async def steer(self, thread_id: str, message_id: str, text: str) -> None:
        self.store.steer(thread_id, _user(message_id, text))

    async def approve(self, run_id: str, tool_call_id: str) -> None:
        self.store.respond(run_id, tool_call_id, approved=True)

    async def request_cancel(self, run_id: str) -> None:
        self.store.request_cancel(run_id)

    async def expire_lease(self, run_id: str) -> None:
        self.store.runs[run_id].lease_expires_at = datetime.now(UTC) - timedelta(seconds=1)

    async def run(self, run_id: str) -> RunView:
        run = self.store.runs[run_id]
        return RunView(
            status=run.status,
            token=run.lease_token,
            attempt=run.attempt,
            step_count=run.step_count,
            owner=run.lease_owner or "",
            usage=dict(run.usage),
            error=run.error,
            cancel_requested=run.cancel_requested,
        )

    async def messages(self, thread_id: str) -> list[MessageView]:
        return [
            MessageView(
                id=m.message["id"],
                role=m.message["role"],
                status=m.status,
                parts=copy.deepcopy(m.message["parts"]),
                run_id=m.run_id,
                step_index=m.step_index,
                usage=copy.deepcopy(m.usage),
            )
            for m in self.store.messages
            if m.thread_id == thread_id
        ]

    async def steps(self, run_id: str) -> list[int]:
        return [step.index for step in self.store.steps.get(run_id, [])]

    async def actions(self, run_id: str) -> dict[str, str]:
        return {
            call_id: action["status"]
            for (owner, call_id), action in self.store.actions.items()
            if owner == run_id
        }

    async def queued_steering(self, thread_id: str) -> list[str]:
        return [m["id"] for m in self.store.steering.get(thread_id, [])]

    async def snapshot(self, thread_id: str, run_id: str) -> dict[str, Any]:
        return {
            "run": await self.run(run_id),
            "expires": self.store.runs[run_id].lease_expires_at,
            "messages": await self.messages(thread_id),
            "steps": await self.steps(run_id),
            "actions": await self.actions(run_id),
            "steering": await self.queued_steering(thread_id),
        }


class ORMBackend:
    """``pai_threads`` on the test database; each read-back is one short connection."""

    name = "orm"

    def worker(self) -> ThreadStore:
        return ORMThreadStore()

    async def start_run(self, text: str = "hello") -> tuple[str, str]:
        def create() -> tuple[str, str]:
            thread = services.create_thread(_identity(), agent=AGENT)
            sent = services.send(_identity(), thread.id, _user("user-1", text), dispatch=False)
            assert sent.run is not None
            return thread.id, sent.run.id

        return await _db(create)

    async def steer(self, thread_id: str, message_id: str, text: str) -> None:
        await _db(
            services.send,
            _identity(),
            thread_id,
            _user(message_id, text),
            policy="steer",
            dispatch=False,
        )

    async def approve(self, run_id: str, tool_call_id: str) -> None:
        def answer() -> None:
            action = PendingAction.objects.get(run_id=run_id, tool_call_id=tool_call_id)
            services.submit_action(_identity(), action.id, {"approved": True}, dispatch=False)

        await _db(answer)

    async def request_cancel(self, run_id: str) -> None:
        await _db(services.cancel_run, _identity(), run_id)

    async def expire_lease(self, run_id: str) -> None:
        past = timezone.now() - timedelta(seconds=1)
        await _db(lambda: Run.objects.filter(id=run_id).update(lease_expires_at=past))

    async def run(self, run_id: str) -> RunView:
        return await _db(self._run, run_id)

    @staticmethod
    def _run(run_id: str) -> RunView:
        run = Run.objects.get(id=run_id)
        return RunView(
            status=run.status,
            token=run.lease_token,
            attempt=run.attempt,
            step_count=run.step_count,
            owner=run.lease_owner,
            usage=dict(run.usage),
            error=run.error,
            cancel_requested=run.cancel_requested_at is not None,
        )

    async def messages(self, thread_id: str) -> list[MessageView]:
        return await _db(self._messages, thread_id)

    @staticmethod
    def _messages(thread_id: str) -> list[MessageView]:
        return [
            MessageView(
                id=m.message_id,
                role=m.role,
                status=m.status,
                parts=m.parts,
                run_id=m.run_id,
                step_index=m.step_index,
                usage=m.usage,
            )
            for m in Message.objects.filter(thread_id=thread_id).order_by("id")
        ]

    async def steps(self, run_id: str) -> list[int]:
        return await _db(
            lambda: list(
                Step.objects.filter(run_id=run_id).order_by("index").values_list("index", flat=True)
            )
        )

    async def actions(self, run_id: str) -> dict[str, str]:
        return await _db(
            lambda: dict(
                PendingAction.objects.filter(run_id=run_id).values_list("tool_call_id", "status")
            )
        )

    async def queued_steering(self, thread_id: str) -> list[str]:
        return await _db(
            lambda: list(
                QueueItem.objects.filter(thread_id=thread_id, status=QueueItem.Status.QUEUED)
                .order_by("created_at", "id")
                .values_list("message_id", flat=True)
            )
        )

    async def snapshot(self, thread_id: str, run_id: str) -> dict[str, Any]:
        expires = await _db(
            lambda: Run.objects.filter(id=run_id).values_list("lease_expires_at", flat=True).get()
        )
        return {
            "run": await self.run(run_id),
            "expires": expires,
            "messages": await self.messages(thread_id),
            "steps": await self.steps(run_id),
            "actions": await self.actions(run_id),
            "steering": await self.queued_steering(thread_id),
        }


def _user(message_id: str, text: str) -> UIMessage:
    return UIMessage(id=message_id, role="user", parts=[{"type": "text", "text": text}])


def _identity() -> Identity:
    return Identity(scope_key=SCOPE, data={"userId": "alice"})


async def _db(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await run_db_closing(fn, *args, **kwargs)
