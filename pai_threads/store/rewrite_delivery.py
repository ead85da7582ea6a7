"""``history_rewritten`` delivery across processes: a per-thread lease in the database (LC-065).

The in-process :class:`~pai_agents.engine.rewrites.RewriteDispatcher` serializes one
process's facts per thread and bounds how many hooks run at once; two processes (web
requests and workers) rewriting the same thread need more, so each delivery goes through
the thread's :class:`~pai_threads.models.RewriteDelivery` row:

1. *offer*: the fact becomes the row's ``pending`` fact, unless a newer one is pending or
   was already delivered (coalescing: the latest after-version wins);
2. *acquire*: one conditional UPDATE takes the lease if it is free or expired; a process
   that finds it held returns at once, leaving its fact to the holder;
3. the holder *takes* the pending fact and runs the hook (renewing the lease every third of
   ``LEASE_SECONDS`` meanwhile), and *releases* only when nothing is pending, so a fact
   offered while it delivered is never stranded.

A fact the committing process delivers itself uses the runtime context its rewrite built;
another process rebuilds it from the stored identity and client data (and skips a fact whose
identity was not strict JSON). Delivery stays best effort: a fact pending when its holder
dies waits for the thread's next rewrite.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import threading
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final, TypeVar

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from pai_agents.agent import AgentDefinition
from pai_agents.engine.rewrites import (
    Job,
    build_runtime_context,
    dispatcher,
    has_history_rewritten,
    history_rewritten_job,
    report_rewrite_error,
)
from pai_agents.ids import new_id
from pai_agents.json import NotStrictJson, ensure_strict_json
from pai_agents.lifecycle.facade import MessageVisibility
from pai_agents.lifecycle.inputs import (
    HistoryRewrite,
    RegenerateRewrite,
    VisibilityChange,
    VisibilityRewrite,
)
from pai_threads.conf import pai_settings
from pai_threads.execution import registry
from pai_threads.models import RewriteDelivery
from pai_threads.store.db import run_db_closing as _db

__all__ = [
    "LOST",
    "acquire",
    "decode_rewrite",
    "deliver",
    "drain",
    "encode_rewrite",
    "offer",
    "release",
    "renew",
    "schedule",
    "take",
]

logger = logging.getLogger("pai.rewrites")
T = TypeVar("T")
LOST: Final = object()  # the lease was taken over: stop delivering
_MAX_LOCAL: Final = 1024

# Jobs of facts this process committed, by fact id: delivered with their own runtime context
# when this process takes them (bounded: facts another process delivers are never taken here).
_local: collections.OrderedDict[str, Job] = collections.OrderedDict()
_local_lock = threading.Lock()


def schedule(
    agent: AgentDefinition,
    *,
    thread_id: str,
    rewrite: HistoryRewrite,
    after_version: int,
    runtime_context: Any,
    run_id: str,
    identity: Mapping[str, Any],
    client_data: Mapping[str, Any],
) -> None:
    """Inside the rewrite's transaction: deliver ``history_rewritten`` once it commits."""
    if not has_history_rewritten(agent):
        return
    fact = {
        "id": new_id("rwf"),
        "agent": agent.name,
        "version": after_version,
        "runId": run_id,
        "rewrite": encode_rewrite(rewrite),
        "identity": dict(identity),
        "clientData": dict(client_data),
    }
    try:
        ensure_strict_json(fact, what="history rewrite fact")
    except NotStrictJson:
        # Never fail the rewrite over its fact: only this process can deliver it then.
        fact.update(identity={}, clientData={}, portable=False)
    job = history_rewritten_job(
        agent,
        thread_id=thread_id,
        rewrite=rewrite,
        after_version=after_version,
        runtime_context=runtime_context,
        run_id=run_id,
    )
    transaction.on_commit(lambda: _submit(thread_id, fact, job))


def _submit(thread_id: str, fact: dict[str, Any], job: Job) -> None:
    with _local_lock:
        _local[fact["id"]] = job
        while len(_local) > _MAX_LOCAL:
            _local.popitem(last=False)
    dispatcher().submit(thread_id, functools.partial(deliver, thread_id, fact))


async def deliver(thread_id: str, fact: dict[str, Any]) -> None:
    """Offer ``fact``; if the thread's lease is free, deliver until nothing is pending."""
    ttl = float(pai_settings.LEASE_SECONDS)
    if not await _db(offer, thread_id, fact):
        _forget(fact["id"])  # coalesced: a newer fact is pending or already delivered
        return
    owner = uuid.uuid4().hex
    if await _db(acquire, thread_id, owner, ttl):
        await drain(thread_id, owner, ttl)
    # else: the holder delivers it before releasing


async def drain(thread_id: str, owner: str, ttl: float) -> None:
    """As the lease's holder: deliver the pending fact until none is left, then release."""
    while True:
        taken = await _db(take, thread_id, owner, ttl)
        if taken is LOST:
            logger.warning("history_rewritten lease of thread %s was taken over", thread_id)
            return
        if taken is None:
            if await _db(release, thread_id, owner):
                return
            continue  # a fact arrived while we delivered
        job = await _job_for(thread_id, taken)
        if job is not None:
            await _holding(job(), thread_id, owner, ttl)


# -- the lease, each step one short autocommit statement (or two) --


def offer(thread_id: str, fact: Mapping[str, Any]) -> bool:
    """Make ``fact`` the thread's pending fact unless a newer one is pending or delivered."""
    version = int(fact["version"])
    try:
        RewriteDelivery.objects.bulk_create(
            [RewriteDelivery(thread_id=thread_id)], ignore_conflicts=True
        )
    except IntegrityError:  # the thread is gone
        return False
    newer = RewriteDelivery.objects.filter(
        thread_id=thread_id, pending_version__lt=version, delivered_version__lt=version
    )
    return newer.update(pending=dict(fact), pending_version=version) == 1


def acquire(thread_id: str, owner: str, ttl: float) -> bool:
    """Take the lease if it is free or expired: one conditional UPDATE."""
    now = timezone.now()
    free = Q(owner="") | Q(expires_at__lt=now)
    leased = RewriteDelivery.objects.filter(free, thread_id=thread_id)
    return leased.update(owner=owner, expires_at=now + timedelta(seconds=ttl)) == 1


def take(thread_id: str, owner: str, ttl: float) -> Any:
    """The pending fact (now marked delivered), None when none, ``LOST`` without the lease."""
    mine = RewriteDelivery.objects.filter(thread_id=thread_id, owner=owner)
    while True:
        row = mine.values_list("pending", "pending_version").first()
        if row is None:
            return LOST
        pending, version = row
        if not version:
            return None
        taken = mine.filter(pending_version=version).update(
            pending=None,
            pending_version=0,
            delivered_version=version,
            expires_at=timezone.now() + timedelta(seconds=ttl),
        )
        if taken:
            return pending
        # A newer fact replaced it between the read and the UPDATE: read again.


def release(thread_id: str, owner: str) -> bool:
    """Free the lease if nothing is pending; True when delivery is over (also if lost)."""
    mine = RewriteDelivery.objects.filter(thread_id=thread_id, owner=owner)
    if mine.filter(pending_version=0).update(owner="", expires_at=None):
        return True
    return not mine.exists()


def renew(thread_id: str, owner: str, ttl: float) -> bool:
    mine = RewriteDelivery.objects.filter(thread_id=thread_id, owner=owner)
    return mine.update(expires_at=timezone.now() + timedelta(seconds=ttl)) == 1


# -- running one fact --


async def _holding(call: Any, thread_id: str, owner: str, ttl: float) -> None:
    """Run the hook, renewing the lease meanwhile so no other process takes it over."""
    task = asyncio.ensure_future(call)
    while not task.done():
        await asyncio.wait({task}, timeout=ttl / 3)
        if not task.done() and not await _db(renew, thread_id, owner, ttl):
            logger.warning("history_rewritten lease of thread %s lost mid-delivery", thread_id)
    try:
        task.result()
    except Exception:  # jobs report their own failures; this is a last resort
        logger.exception("history_rewritten job crashed for thread %s", thread_id)


async def _job_for(thread_id: str, fact: Mapping[str, Any]) -> Job | None:
    """This process's own job for the fact, or one rebuilt from the stored fact."""
    with _local_lock:
        local = _local.pop(str(fact.get("id")), None)
    if local is not None:
        return local
    if fact.get("portable") is False:
        logger.warning("history_rewritten for thread %s skipped: its context is local", thread_id)
        return None
    try:
        agent = registry.get_agent(str(fact["agent"]))
    except registry.AgentNotFound:
        logger.warning("history_rewritten for thread %s: unknown agent", thread_id)
        return None
    run_id = str(fact.get("runId") or "")
    runtime_context = None
    if agent.lifecycle is not None:
        try:
            runtime_context = await build_runtime_context(
                agent,
                identity=fact.get("identity") or {},
                client_data=fact.get("clientData") or {},
                thread_id=thread_id,
                run_id=run_id,
            )
        except Exception as exc:
            await report_rewrite_error(agent, thread_id=thread_id, run_id=run_id, exc=exc)
            return None
    return history_rewritten_job(
        agent,
        thread_id=thread_id,
        rewrite=decode_rewrite(fact["rewrite"]),
        after_version=int(fact["version"]),
        runtime_context=runtime_context,
        run_id=run_id,
    )


def _forget(fact_id: str) -> None:
    with _local_lock:
        _local.pop(fact_id, None)


# -- the stored fact's rewrite --


def encode_rewrite(rewrite: HistoryRewrite) -> dict[str, Any]:
    """A rewrite as JSON (camelCase, like the wire), for a fact another process delivers."""
    if isinstance(rewrite, RegenerateRewrite):
        return {
            "kind": "regenerate",
            "targetMessageId": rewrite.target_message_id,
            "retainedMessageIds": list(rewrite.retained_message_ids),
            "removedMessageIds": list(rewrite.removed_message_ids),
            "beforeVersion": rewrite.before_version,
        }
    return {
        "kind": "visibility",
        "changes": [
            {
                "messageId": c.message_id,
                "before": {"transcript": c.before.transcript, "context": c.before.context},
                "after": {"transcript": c.after.transcript, "context": c.after.context},
            }
            for c in rewrite.changes
        ],
        "beforeVersion": rewrite.before_version,
    }


def decode_rewrite(data: Mapping[str, Any]) -> HistoryRewrite:
    if data["kind"] == "regenerate":
        return RegenerateRewrite(
            target_message_id=data["targetMessageId"],
            retained_message_ids=tuple(data["retainedMessageIds"]),
            removed_message_ids=tuple(data["removedMessageIds"]),
            before_version=data["beforeVersion"],
        )
    return VisibilityRewrite(
        changes=tuple(
            VisibilityChange(
                message_id=c["messageId"],
                before=MessageVisibility(**c["before"]),
                after=MessageVisibility(**c["after"]),
            )
            for c in data["changes"]
        ),
        before_version=data["beforeVersion"],
    )
