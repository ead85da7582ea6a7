"""History rewrite hooks, store-neutral (LC-057..LC-066).

A store that rewrites history (regenerate, a trusted visibility rewrite) does, inside the
rewrite's own transaction and under the thread lock:

1. describe the rewrite (:class:`RegenerateRewrite` / :class:`VisibilityRewrite`, with the
   thread version before it);
2. ``bags = await prepare_rewrite(agent, ...)``: the agent's ``prepare_history_rewrite``
   with the current version and thread metadata; its sparse patches are shallow-merged and
   the complete bags validated against the agent's thread schemas (raising rolls the
   rewrite back: both or neither, LC-057);
3. write the rewrite, ``bags`` and ``version + 1`` together;
4. after commit, hand :func:`history_rewritten_job` to a :class:`RewriteDispatcher`
   (:func:`dispatcher`): calls are serialized per thread, bounded across threads, may be
   coalesced under load, run with a post-commit signal of their own, and a failure is only
   reported through ``on_runtime_error`` (LC-062..LC-065).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import threading
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from pai_agents._callables import call_user
from pai_agents.abort import AbortSignal
from pai_agents.agent import AgentBehaviorInput, AgentDefinition
from pai_agents.engine.runtime_errors import RuntimeErrorReport, hook_origin
from pai_agents.lifecycle.facade import MessageVisibility, MutationConflict
from pai_agents.lifecycle.hooks import overridden_phases
from pai_agents.lifecycle.inputs import (
    HistoryRewrite,
    HistoryRewrittenInput,
    PrepareHistoryRewriteInput,
    RegenerateRewrite,
    VisibilityChange,
    VisibilityRewrite,
)
from pai_agents.lifecycle.memory import InMemoryLifecycleStore
from pai_agents.lifecycle.metadata import MetadataBags, merge_metadata
from pai_agents.lifecycle.validation import merged_bag, with_visibility

__all__ = [
    "RewriteBusy",
    "RewriteDispatcher",
    "build_runtime_context",
    "dispatcher",
    "has_history_rewritten",
    "history_rewritten_job",
    "memory_regenerate",
    "memory_update_visibility",
    "prepare_rewrite",
    "report_rewrite_error",
    "visibility_rewrite",
]

logger = logging.getLogger("pai.rewrites")
Job = Callable[[], Coroutine[Any, Any, None]]


async def build_runtime_context(
    agent: AgentDefinition,
    *,
    identity: Mapping[str, Any],
    client_data: Mapping[str, Any],
    thread_id: str,
    run_id: str = "",
) -> Any:
    """The agent's runtime context for a rewrite (``run_id`` is the regenerate run's)."""
    behavior = AgentBehaviorInput(
        identity=dict(identity),
        client_data=dict(client_data),
        runtime_context=None,
        thread_id=thread_id,
        run_id=run_id,
    )
    return await agent.build_runtime_context(behavior)


async def prepare_rewrite(
    agent: AgentDefinition,
    *,
    thread_id: str,
    rewrite: HistoryRewrite,
    version: int,
    private_metadata: Mapping[str, Any],
    metadata: Mapping[str, Any],
    runtime_context: Any = None,
    signal: AbortSignal | None = None,
) -> MetadataBags:
    """Run ``prepare_history_rewrite`` and return the thread bags to commit with the rewrite.

    The hook sees the current version and the parsed (typed) bags (LC-060); its sparse
    patches are merged top-level and each complete bag is validated (AD-033). Any exception
    (the hook's or ``InvalidMetadata``) propagates: the caller's transaction rolls back.
    """
    private, public = dict(private_metadata), dict(metadata)
    lifecycle = agent.lifecycle
    if lifecycle is None:
        return MetadataBags(private=private, public=public)
    patch = await lifecycle.prepare_history_rewrite(
        PrepareHistoryRewriteInput(
            runtime_context=runtime_context,
            thread_id=thread_id,
            rewrite=rewrite,
            version=version,
            private_metadata=dict(private),
            metadata=dict(public),
            signal=signal or AbortSignal(),
        )
    )
    schemas = agent.thread_metadata
    if patch is not None and patch.private_metadata is not None:
        private = _merge(schemas and schemas.private, private, patch.private_metadata, "private")
    if patch is not None and patch.metadata is not None:
        public = _merge(schemas and schemas.public, public, patch.metadata, "public")
    return MetadataBags(private=private, public=public)


def _merge(schema: Any, current: dict[str, Any], patch: Mapping[str, Any], which: str) -> Any:
    what = f"prepare_history_rewrite thread {which} metadata"
    if schema is not None:
        return merge_metadata(schema, current, patch, what=what)
    return merged_bag(None, current, patch, what)


async def report_rewrite_error(
    agent: AgentDefinition,
    *,
    thread_id: str,
    run_id: str,
    exc: BaseException,
    phase: str = "history_rewritten",
) -> None:
    """``on_runtime_error`` (the agent's and its lifecycle parts') for a rewrite hook."""
    reporters: list[Any] = [agent.on_runtime_error]
    if agent.lifecycle is not None:
        reporters += [getattr(p, "on_runtime_error", None) for _, p in agent.lifecycle.parts]
    origin, part = hook_origin(exc)
    report = RuntimeErrorReport(
        run_id=run_id,
        thread_id=thread_id,
        agent_name=agent.name,
        error=exc,
        phase=origin or phase,
        part=part,
    )
    for reporter in reporters:
        if not callable(reporter):
            continue
        try:
            await call_user(cast(Any, reporter), report)
        except Exception:  # never let a broken reporter escape a post-commit hook
            logger.exception("on_runtime_error reporter failed for thread %s", thread_id)


def has_history_rewritten(agent: AgentDefinition) -> bool:
    """Whether a post-commit fact needs scheduling at all."""
    lifecycle = agent.lifecycle
    return lifecycle is not None and "history_rewritten" in overridden_phases(lifecycle)


def history_rewritten_job(
    agent: AgentDefinition,
    *,
    thread_id: str,
    rewrite: HistoryRewrite,
    after_version: int,
    runtime_context: Any = None,
    run_id: str = "",
) -> Job:
    """The post-commit call: ``rewrite.after_version`` set, a fresh signal (LC-062, LC-064);
    a raise is reported, never propagated (LC-063)."""
    committed = dataclasses.replace(rewrite, after_version=after_version)

    async def job() -> None:
        lifecycle = agent.lifecycle
        if lifecycle is None:
            return
        try:
            await lifecycle.history_rewritten(
                HistoryRewrittenInput(
                    runtime_context=runtime_context,
                    thread_id=thread_id,
                    rewrite=committed,
                    signal=AbortSignal(),
                )
            )
        except Exception as exc:
            logger.warning(
                "history_rewritten failed for thread %s (%s)", thread_id, type(exc).__name__
            )
            await report_rewrite_error(agent, thread_id=thread_id, run_id=run_id, exc=exc)

    return job


class RewriteDispatcher:
    """Runs post-commit rewrite facts: one at a time per thread, ``max_workers`` threads in
    all; at most ``max_pending`` facts wait per thread (older ones are coalesced away)."""

    def __init__(self, *, max_workers: int = 4, max_pending: int = 16) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="pai-rw")
        self._max_pending = max_pending
        self._lock = threading.Condition()
        self._pending: dict[str, collections.deque[Job]] = {}
        self._active: set[str] = set()
        self.coalesced = 0

    def submit(self, key: str, job: Job) -> None:
        with self._lock:
            queue = self._pending.setdefault(key, collections.deque())
            queue.append(job)
            while len(queue) > self._max_pending:
                queue.popleft()  # LC-065: delivery of every fact is not guaranteed
                self.coalesced += 1
            if key in self._active:
                return  # the running drainer picks it up: never two at once per thread
            self._active.add(key)
        self._pool.submit(self._drain, key)

    def _drain(self, key: str) -> None:
        while True:
            with self._lock:
                queue = self._pending.get(key)
                if not queue:
                    self._pending.pop(key, None)
                    self._active.discard(key)
                    self._lock.notify_all()
                    return
                job = queue.popleft()
            try:
                asyncio.run(job())
            except Exception:  # jobs report their own failures; this is a last resort
                logger.exception("history_rewritten job crashed for thread %s", key)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until no fact is pending or running (tests, shutdown)."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._active, timeout=timeout)


_default: RewriteDispatcher | None = None
_default_lock = threading.Lock()


def dispatcher() -> RewriteDispatcher:
    """The process-wide dispatcher."""
    global _default
    with _default_lock:
        if _default is None:
            _default = RewriteDispatcher()
        return _default


# -- the in-memory reference (InMemoryLifecycleStore): the same protocol, with CAS retry --


class RewriteBusy(RuntimeError):
    """A run holds the thread's lease: regeneration and admin rewrites wait (LC-050)."""


async def memory_regenerate(
    store: InMemoryLifecycleStore,
    agent: AgentDefinition,
    scope_key: str,
    thread_id: str,
    *,
    runtime_context: Any = None,
    run_id: str = "",
    rewritten: RewriteDispatcher | None = None,
    attempts: int = 5,
) -> RegenerateRewrite:
    """Hide everything after the latest transcript user message, with the rewrite hooks.

    Optimistic: the rewrite is described from a snapshot, prepared, and committed only if
    the thread version did not move; otherwise it is described and prepared again with
    fresh input (LC-061).
    """
    for _ in range(attempts):
        with store._lock:
            _refuse_if_leased(store, scope_key, thread_id)
            thread = store._threads[(scope_key, thread_id)]
            version, bags = thread.version, store.thread_bags(scope_key, thread_id)
            rows = store._thread_rows(scope_key, thread_id)
        physical = [r.message for r in rows]
        users = [m for m in physical if m.role == "user" and m.visibility.transcript]
        if not users:
            raise LookupError("there is no user message to regenerate an answer for")
        target = users[-1]
        cut = physical.index(target) + 1
        # LC-058: physical ids, chronological: context-only messages after the target go too.
        rewrite = RegenerateRewrite(
            target_message_id=target.id,
            retained_message_ids=tuple(m.id for m in physical[:cut]),
            removed_message_ids=tuple(m.id for m in physical[cut:]),
            before_version=version,
        )
        new = await prepare_rewrite(
            agent,
            thread_id=thread_id,
            rewrite=rewrite,
            version=version,
            private_metadata=bags.private,
            metadata=bags.public,
            runtime_context=runtime_context,
        )
        hidden = MessageVisibility(transcript=False, context=False)
        changes = {message_id: hidden for message_id in rewrite.removed_message_ids}
        if _commit_rewrite(store, scope_key, thread_id, version, changes, new):
            after = version + 1
            _after_commit(agent, thread_id, rewrite, after, runtime_context, run_id, rewritten)
            return dataclasses.replace(rewrite, after_version=version + 1)
    raise MutationConflict("the thread kept changing; regenerate again")


async def memory_update_visibility(
    store: InMemoryLifecycleStore,
    agent: AgentDefinition,
    scope_key: str,
    thread_id: str,
    changes: Mapping[str, Mapping[str, bool]],
    *,
    runtime_context: Any = None,
    rewritten: RewriteDispatcher | None = None,
) -> VisibilityRewrite | None:
    """A trusted visibility rewrite under the store lock: prepared exactly once (LC-061)."""
    with store._lock:
        _refuse_if_leased(store, scope_key, thread_id)
        thread = store._threads[(scope_key, thread_id)]
        version, bags = thread.version, store.thread_bags(scope_key, thread_id)
        current = {
            r.message.id: r.message.visibility for r in store._thread_rows(scope_key, thread_id)
        }
        rewrite = visibility_rewrite(current, changes, before_version=version)
        if rewrite is None:
            return None
        new = await prepare_rewrite(
            agent,
            thread_id=thread_id,
            rewrite=rewrite,
            version=version,
            private_metadata=bags.private,
            metadata=bags.public,
            runtime_context=runtime_context,
        )
        after = {c.message_id: c.after for c in rewrite.changes}
        _commit_rewrite(store, scope_key, thread_id, version, after, new)
    _after_commit(agent, thread_id, rewrite, version + 1, runtime_context, "", rewritten)
    return dataclasses.replace(rewrite, after_version=version + 1)


def visibility_rewrite(
    current: Mapping[str, MessageVisibility],
    changes: Mapping[str, Mapping[str, bool]],
    *,
    before_version: int,
) -> VisibilityRewrite | None:
    """Describe ``changes`` (``{message_id: {"transcript"?: bool, "context"?: bool}}``) with
    each changed message's complete before/after visibility (LC-059); None if none change.

    Raises ``LookupError`` for a message not in the thread, ``ValueError`` for bad keys."""
    described: list[VisibilityChange] = []
    for message_id, change in changes.items():
        if message_id not in current:
            raise LookupError(f"message {message_id!r} is not in this thread")
        if not isinstance(change, Mapping) or not set(change) <= {"transcript", "context"}:
            raise ValueError("a visibility change is {'transcript'?: bool, 'context'?: bool}")
        if not all(isinstance(v, bool) for v in change.values()):
            raise ValueError("visibility values must be booleans")
        before = current[message_id]
        after = MessageVisibility(
            transcript=change.get("transcript", before.transcript),
            context=change.get("context", before.context),
        )
        if after != before:
            described.append(VisibilityChange(message_id=message_id, before=before, after=after))
    if not described:
        return None
    return VisibilityRewrite(changes=tuple(described), before_version=before_version)


def _refuse_if_leased(store: InMemoryLifecycleStore, scope_key: str, thread_id: str) -> None:
    for run in store._runs.values():
        if (run.scope_key, run.thread_id) == (scope_key, thread_id) and run.status == "running":
            raise RewriteBusy("a run holds this thread's lease")


def _commit_rewrite(
    store: InMemoryLifecycleStore,
    scope_key: str,
    thread_id: str,
    version: int,
    changes: Mapping[str, MessageVisibility],
    bags: MetadataBags,
) -> bool:
    with store._lock:
        thread = store._threads[(scope_key, thread_id)]
        if thread.version != version:
            return False
        for row in store._thread_rows(scope_key, thread_id):
            if row.message.id in changes:
                row.message = with_visibility(row.message, changes[row.message.id])
        public_changed = bags.public != thread.public
        thread.private, thread.public = dict(bags.private), dict(bags.public)
        thread.version += 1
        store.events.append(
            {
                "type": "thread.head",
                "threadId": thread_id,
                "version": thread.version,
                "metadata": dict(thread.public),
                **({"metadataChanged": True} if public_changed else {}),
            }
        )
        return True


def _after_commit(
    agent: AgentDefinition,
    thread_id: str,
    rewrite: HistoryRewrite,
    after_version: int,
    runtime_context: Any,
    run_id: str,
    rewritten: RewriteDispatcher | None,
) -> None:
    if not has_history_rewritten(agent):
        return
    job = history_rewritten_job(
        agent,
        thread_id=thread_id,
        rewrite=rewrite,
        after_version=after_version,
        runtime_context=runtime_context,
        run_id=run_id,
    )
    (rewritten or dispatcher()).submit(thread_id, job)
