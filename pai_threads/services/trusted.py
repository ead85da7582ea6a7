"""Trusted server access to one thread's runs: metadata enrichment after a run (LC-034).

A lifecycle hook's ``run.metadata`` / ``run.private_metadata`` clients are fenced by the
execution lease (LC-032, LC-033): once the run waits or ends, a client kept from a hook
raises ``LeaseLost``. Server code that enriches a run later (a billing job, a review
queue, an operator tool) uses this facade instead::

    from pai_threads import trusted_thread

    run = trusted_thread(thread_id).runs.get(run_id)
    run.private_metadata.merge({"invoice": "inv_42"})
    await run.metadata.amerge({"rating": "good"})

It is trusted code's tool: no identity and no lease, but bound to one thread (a run of
another thread is :class:`~pai_threads.errors.NotFound`) and, with ``scope_key=``, to one
partition. Every write validates the complete bag against the thread agent's
``run_metadata`` schemas (LC-024..LC-027), runs in one transaction that locks the run row
(so it serializes with the run's own fenced writes), and a change of the public bag is
published to clients after commit (LC-029); the private bag never leaves the server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.db import transaction

from pai_agents.json import JsonObject
from pai_agents.lifecycle.validation import merged_bag, validated_bag
from pai_threads.errors import NotFound
from pai_threads.events.publishing import publish_after_commit
from pai_threads.events.types import run_status_of
from pai_threads.execution import registry
from pai_threads.models import Run

__all__ = ["TrustedRun", "TrustedRunMetadata", "TrustedRuns", "TrustedThread", "trusted_thread"]


def trusted_thread(thread_id: str, *, scope_key: str | None = None) -> TrustedThread:
    """The trusted facade of ``thread_id`` (in partition ``scope_key`` when given).

    Nothing is read until a method is called; a missing thread (or one of another
    partition) raises NotFound there, exactly like a missing run."""
    return TrustedThread(thread_id=thread_id, scope_key=scope_key)


class TrustedThread:
    """``thread.runs`` for trusted server code."""

    def __init__(self, *, thread_id: str, scope_key: str | None = None) -> None:
        self.thread_id = thread_id
        self.scope_key = scope_key
        self.runs = TrustedRuns(self)

    def _runs(self) -> Any:
        runs = Run.objects.filter(thread_id=self.thread_id)
        if self.scope_key is not None:
            runs = runs.filter(scope_key=self.scope_key)
        return runs


class TrustedRuns:
    def __init__(self, thread: TrustedThread) -> None:
        self._thread = thread

    def get(self, run_id: str) -> TrustedRun:
        """The run's metadata clients; NotFound unless the run belongs to this thread."""
        if not self._thread._runs().filter(id=run_id).exists():
            raise NotFound("run not found")
        return TrustedRun(self._thread, run_id)

    async def aget(self, run_id: str) -> TrustedRun:
        return await sync_to_async(self.get)(run_id)


class TrustedRun:
    """One run of the thread: ``private_metadata`` (server only) and ``metadata``
    (projected to clients), each with get / merge / replace and ``a``-prefixed twins."""

    def __init__(self, thread: TrustedThread, run_id: str) -> None:
        self.thread_id = thread.thread_id
        self.run_id = run_id
        self.private_metadata = TrustedRunMetadata(thread, run_id, "private")
        self.metadata = TrustedRunMetadata(thread, run_id, "public")


class TrustedRunMetadata:
    """A run's private or public metadata bag, written in any run status."""

    def __init__(
        self, thread: TrustedThread, run_id: str, which: Literal["private", "public"]
    ) -> None:
        self._thread = thread
        self._run_id = run_id
        self._which = which
        self._column = "private_metadata" if which == "private" else "metadata"

    def get(self) -> JsonObject:
        found = list(self._row().values_list(self._column, flat=True)[:1])
        if not found:
            raise NotFound("run not found")
        return dict(found[0] or {})

    def merge(self, patch: Mapping[str, Any]) -> JsonObject:
        """Shallow top-level merge; the merged bag is validated whole and returned."""
        return self._write(lambda schema, current: merged_bag(schema, current, patch, self._what))

    def replace(self, value: Mapping[str, Any]) -> JsonObject:
        """Swap the whole bag (absent keys disappear) after full validation."""
        return self._write(lambda schema, current: validated_bag(schema, value, self._what))

    async def aget(self) -> JsonObject:
        return await sync_to_async(self.get)()

    async def amerge(self, patch: Mapping[str, Any]) -> JsonObject:
        return await sync_to_async(self.merge)(patch)

    async def areplace(self, value: Mapping[str, Any]) -> JsonObject:
        return await sync_to_async(self.replace)(value)

    @property
    def _what(self) -> str:
        return f"run {self._column}"

    def _row(self) -> Any:
        return self._thread._runs().filter(id=self._run_id)

    def _write(self, change: Callable[[Any, JsonObject], JsonObject]) -> JsonObject:
        with transaction.atomic():
            run = self._row().select_for_update().first()
            if run is None:
                raise NotFound("run not found")
            current: JsonObject = dict(getattr(run, self._column) or {})
            new = change(self._schema(run), current)  # raises: nothing written
            if new == current:
                return new
            setattr(run, self._column, new)
            Run.objects.filter(pk=run.pk).update(**{self._column: new})
            if self._which == "public":  # the private bag is never published
                publish_after_commit(run.thread_id, [run_status_of(run)])
        return new

    def _schema(self, run: Run) -> Any:
        """The run's agent's schema for this bag (strict JSON only if it is unknown)."""
        try:
            pair = registry.get_agent(run.agent_name).metadata_schemas.run
        except registry.AgentNotFound:
            return None
        return None if pair is None else getattr(pair, self._which)
