"""Executing one run: claim its lease, run the engine, publish events.

Both executors call :func:`aexecute_run`; it is safe to call twice for the same run (the
second claim fails while the first lease is live), so correctness never depends on a broker
delivering exactly once.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass

from pai_agents.abort import AbortSignal
from pai_agents.capabilities import CapabilityBindingError
from pai_agents.engine.events import EventSink
from pai_agents.engine.runner import RunEngine
from pai_agents.engine.store import ClaimedRun, LeaseLost, RunNotFound, RunOutcome
from pai_agents.lifecycle.hooks import overridden_phases
from pai_threads.conf import pai_settings
from pai_threads.execution import cancellation, registry, titles
from pai_threads.execution.capabilities import BindingImportError, capability_bindings
from pai_threads.execution.file_provider import file_provider
from pai_threads.observability.signals import (
    asend_run_signal,
    run_finished,
    run_started,
    run_waiting,
)
from pai_threads.realtime import RealtimePublisher, TeeSink
from pai_threads.store.db import run_db
from pai_threads.store.thread_store import ORMThreadStore

__all__ = ["Claimed", "aexecute_run", "claim_now", "context_follows_claim", "worker_name"]

logger = logging.getLogger("pai.execute")


def worker_name(native_thread_id: int | None = None) -> str:
    """Identifies the lease owner in the admin and logs: host, process and thread (the
    operating system's thread id, as ``top -H`` and py-spy show it; shorter than Python's
    ``get_ident``, and written in the run's and the attempt's rows: W2 counts WAL bytes).
    The calling thread's unless the thread that will execute the run is given."""
    native = threading.get_native_id() if native_thread_id is None else native_thread_id
    return f"{socket.gethostname()}:{os.getpid()}:{native}"


@dataclass(frozen=True)
class Claimed:
    """A run claimed by :func:`claim_now`, with the store that claimed it (which keeps the
    context it read with the claim), for :func:`aexecute_run`."""

    store: ORMThreadStore
    claim: ClaimedRun


def claim_now(run_id: str, *, owner: str) -> Claimed | None:
    """Claim ``run_id`` on the calling (synchronous) thread; None when it is not claimable.

    An executor's dispatch (after a send's commit, on the request's thread) and a Celery
    task (on its pool thread) claim here, then hand the run to the loop: its engine starts
    without a store hop, the first token sooner. The claim is the one :func:`aexecute_run`
    makes: same statement, lease and attempt row; only the thread differs."""
    store = ORMThreadStore(context_on_claim=context_follows_claim)
    try:
        claim = store.claim_run_sync(run_id, owner=owner, lease_seconds=pai_settings.LEASE_SECONDS)
    except RunNotFound:
        logger.info("run %s not claimable; skipping", run_id, extra={"run_id": run_id})
        return None
    return Claimed(store=store, claim=claim)


def context_follows_claim(agent_name: str) -> bool:
    """Whether the engine reads the thread's context right after the claim: yes unless the
    agent's ``prepare_run`` runs in between (a hook may write the thread). Then the store
    reads it in the claim's own thread hop."""
    try:
        agent = registry.get_agent(agent_name)
    except Exception:
        return False  # the engine reports an unknown agent itself
    return agent.lifecycle is None or "prepare_run" not in overridden_phases(agent.lifecycle)


async def aexecute_run(
    run_id: str,
    *,
    sink: EventSink | None = None,
    signal: AbortSignal | None = None,
    claimed: Claimed | None = None,
) -> RunOutcome | None:
    """Claim and execute ``run_id``; None when it is not claimable (done, or leased).

    Events always go to the thread's realtime subscribers; a given ``sink`` (``pai_chat``)
    receives the same events first. ``claimed``: the run was claimed already
    (:func:`claim_now`), by this process for this loop.
    """
    if claimed is None:  # the same claim, on a store thread (the owner: this loop's thread)
        claimed = await run_db(claim_now, run_id, owner=worker_name())
        if claimed is None:
            return None
    store, claim = claimed.store, claimed.claim
    ids = _signal_ids(claim)
    await asend_run_signal(run_started, **ids, attempt=claim.attempt)
    agent = registry.get_agent(claim.agent_name)
    titles.yield_to_run(claim.thread_id)  # a title call must not hold the model up
    publisher = RealtimePublisher(claim.thread_id, facts=store.facts)
    try:
        bindings = capability_bindings()
        engine = RunEngine(
            agent=agent,
            store=store,
            sink=publisher if sink is None else TeeSink(sink, publisher),
            lease_seconds=pai_settings.LEASE_SECONDS,
            files=file_provider(),
            max_retries=pai_settings.MODEL_MAX_RETRIES,
            retry_backoff_seconds=pai_settings.MODEL_RETRY_BACKOFF_SECONDS,
            max_tool_calls_per_step=pai_settings.MAX_TOOL_CALLS_PER_STEP,
            capabilities=bindings,
        )
    except (CapabilityBindingError, BindingImportError) as exc:
        # manage.py check reports this at start-up (pai.E020..E022); a run that meets it
        # anyway fails at once instead of waiting for its lease to expire.
        logger.error("run %s cannot start: %s", run_id, exc, extra={"run_id": run_id})
        failed = RunOutcome(
            status="failed", error={"type": type(exc).__name__, "message": str(exc)}
        )
        await store.finish_run(claim.lease, failed)
        await publisher.aclose()
        await asend_run_signal(run_finished, **ids, status=failed.status)
        return failed
    signal = signal or AbortSignal()
    try:
        with cancellation.registered(run_id, signal):
            await publisher.announce_claim(claim.lease.run_id)
            outcome = await engine.run_episode(claim, signal=signal)
    except LeaseLost:
        # Another worker owns the run now; this execution wrote nothing after losing it.
        logger.warning("run %s: lease lost, execution abandoned", run_id, extra={"run_id": run_id})
        return None
    finally:
        await publisher.aclose()
    logger.info("run %s ended %s", run_id, outcome.status, extra={"run_id": run_id})
    if outcome.status == "waiting":
        await asend_run_signal(run_waiting, **ids)
    elif outcome.status != "running":
        await asend_run_signal(run_finished, **ids, status=outcome.status)
    # After the final commit and outside the lease; the title job never holds up the run.
    await titles.after_run(agent, thread_id=claim.thread_id, run_id=run_id, status=outcome.status)
    return outcome


def _signal_ids(claim: ClaimedRun) -> dict[str, str]:
    """The ids every run signal carries (pai_threads.signals)."""
    return {
        "run_id": claim.lease.run_id,
        "thread_id": claim.thread_id,
        "scope_key": claim.scope_key,
        "agent_name": claim.agent_name,
    }
