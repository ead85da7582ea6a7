"""The ``thread`` a command receives: the lifecycle facade, for trusted code outside a run.

Lifecycle hooks write to their thread through
:class:`~pai_agents.lifecycle.thread_facade.LifecycleThreadFacade`, every write fenced by
the run's lease. A command runs outside any run, so its facade is the same one on a backend
without the fence: the same validation against the agent's schemas, the same transaction
that locks the thread row, the same events to live clients after commit (``message.
committed``, ``thread.updated``; private metadata never leaves the server). It has no
visibility writes (those belong to hooks and :func:`~pai_threads.services.update_visibility`)
and adds ``runs``, the trusted run-metadata clients of :mod:`.trusted`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pai_agents.agent import AgentDefinition
from pai_agents.lifecycle.backend import LeaseLike, ThreadScope
from pai_agents.lifecycle.thread_facade import LifecycleThreadFacade
from pai_threads.models import Thread
from pai_threads.services.trusted import TrustedRuns, trusted_thread
from pai_threads.store.lifecycle_backend import ORMLifecycleBackend

__all__ = ["CommandThread"]


@dataclass(frozen=True)
class _NoLease:
    """A command holds no run's lease: nothing to fence."""

    run_id: str = ""
    token: int = 0


class _UnfencedBackend(ORMLifecycleBackend):
    """The ORM lifecycle backend for trusted code outside a run: commits are not fenced
    (the thread row lock still serializes them with runs' writes)."""

    def fence(self, lease: LeaseLike) -> None:
        return None


_BACKEND = _UnfencedBackend()


class CommandThread(LifecycleThreadFacade):
    """``ctx.thread``: messages (read, append), metadata, private_metadata, context,
    ``mutate`` and ``runs`` of one thread of one partition."""

    runs: TrustedRuns

    def __init__(self, thread: Thread, agent: AgentDefinition) -> None:
        schemas = agent.metadata_schemas
        scope = ThreadScope(
            scope_key=thread.scope_key,
            thread_id=thread.id,
            lease=_NoLease(),
            thread_schemas=schemas.thread,
            message_schemas=schemas.message,
        )
        super().__init__(_BACKEND, scope, resolver=True)
        self.runs = trusted_thread(thread.id, scope_key=thread.scope_key).runs
