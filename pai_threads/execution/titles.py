"""Automatic thread titles in the database (AD-041..AD-049).

A completed run (only completed ones, AD-042) hands a title job to the executor in use
after its final commit, outside its lease: the in-process executor runs it as a task on the
background loop, Celery as a task of its own; either way the run never waits for it. The job
reads the thread's title record, asks :meth:`ThreadTitles.due`, calls the generator and
stores the title with one conditional UPDATE that only succeeds if the record is still the
one it read, so a rename (or another job) meanwhile wins. A stored title publishes the
public thread head (``thread.updated``).

Titles are best effort: a job lost with its process, a failing model or a timeout leaves the
title as it was until the next completed run.

Titles never hold the user up. The default call is bounded (``ThreadTitles``:
``max_output_tokens``, the first usable line, ``timeout_seconds`` for the whole job), and a
run that starts on the thread while its title job is still calling the model in this process
aborts that job (:func:`yield_to_run`): on a model server with one slot, the user's next
message would otherwise wait behind the title. The title then comes after a later run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from django.utils import timezone

from pai_agents.abort import AbortSignal
from pai_agents.agent import AgentDefinition
from pai_agents.engine.rewrites import build_runtime_context
from pai_agents.messages.types import UIMessage
from pai_agents.title_generation import generate_title
from pai_agents.titles import ThreadTitleInput, TitleRecord
from pai_threads.events.publishing import publish_now
from pai_threads.events.types import thread_updated
from pai_threads.execution import registry
from pai_threads.executors import get_executor
from pai_threads.executors.loop import background_loop
from pai_threads.models import Message, Run, Thread
from pai_threads.store.db import run_db_closing as _db

__all__ = ["after_run", "agenerate", "dispatch_in_process", "schedule", "yield_to_run"]

logger = logging.getLogger("pai.titles")
T = TypeVar("T")

# The newest transcript messages a title call sees.
TRANSCRIPT_MESSAGES = 40
YIELD_REASON = "a run started on the thread"

# The abort signals of this process's title jobs still generating, by thread id.
_generating: dict[str, set[AbortSignal]] = {}
_generating_lock = threading.Lock()


def yield_to_run(thread_id: str) -> None:
    """A run starts on ``thread_id``: abort its title jobs still calling the model here."""
    with _generating_lock:
        signals = list(_generating.get(thread_id, ()))
    for signal in signals:
        signal.abort(YIELD_REASON)


@contextmanager
def _generating_for(thread_id: str, signal: AbortSignal) -> Iterator[None]:
    with _generating_lock:
        _generating.setdefault(thread_id, set()).add(signal)
    try:
        yield
    finally:
        with _generating_lock:
            waiting = _generating.get(thread_id)
            if waiting is not None:
                waiting.discard(signal)
                if not waiting:
                    del _generating[thread_id]


async def after_run(agent: AgentDefinition, *, thread_id: str, run_id: str, status: str) -> None:
    """Called by the executing code once a run has ended and committed (AD-042)."""
    if status != Run.Status.COMPLETED or agent.thread_titles is None:
        return
    await asyncio.to_thread(schedule, thread_id=thread_id, run_id=run_id)


def schedule(*, thread_id: str, run_id: str) -> None:
    """Hand the title job to the executor in use (``dispatch_title``), else run it in
    process; never raises, a lost job only means no title this time."""
    try:
        dispatch: Callable[[str, str], Any] = getattr(
            get_executor(), "dispatch_title", dispatch_in_process
        )
        dispatch(thread_id, run_id)
    except Exception:
        logger.exception("could not schedule a title for thread %s", thread_id)


def dispatch_in_process(thread_id: str, run_id: str) -> Future[str | None]:
    """Run the job as a task on the background loop, next to the runs."""
    future = background_loop().submit(agenerate(thread_id, run_id))
    future.add_done_callback(lambda f: _report(thread_id, f))
    return future


def _report(thread_id: str, future: Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.error("title job crashed for thread %s", thread_id, exc_info=future.exception())


@dataclass(frozen=True, kw_only=True)
class _Loaded:
    thread: Thread
    run: Run
    record: TitleRecord


async def agenerate(thread_id: str, run_id: str) -> str | None:
    """Generate and store the thread's title if one is due; the stored title, or None."""
    loaded = await _db(_load_if_due, thread_id, run_id)
    if loaded is None:
        return None
    thread, run, record = loaded.thread, loaded.run, loaded.record
    agent = registry.get_agent(thread.agent_name)
    config = agent.thread_titles
    if config is None:  # checked by _load_if_due; keeps the type narrow
        return None
    messages = await _db(_transcript, thread_id)
    signal = AbortSignal()

    async def generate() -> str | None:
        runtime_context = await build_runtime_context(
            agent,
            identity=run.identity,
            client_data=run.client_data,
            thread_id=thread_id,
            run_id=run_id,
        )
        title_input = ThreadTitleInput(
            thread_id=thread_id,
            run_id=run_id,
            identity=run.identity,
            client_data=run.client_data,
            runtime_context=runtime_context,
            title=record.title,
            title_source=record.source,
            messages=messages,
            signal=signal,
        )
        return await generate_title(agent, config, title_input)

    try:
        # One deadline for the whole job: a slow runtime_context builder counts too.
        with _generating_for(thread_id, signal):
            title = await asyncio.wait_for(generate(), timeout=config.timeout_seconds)
    except Exception:
        if signal.reason == YIELD_REASON:
            logger.info("thread %s: title job yielded to a new run", thread_id)
            return None
        signal.abort("title generation failed")
        logger.exception("title generation failed for thread %s", thread_id)
        return None

    if title is None:  # AD-049: nothing to store
        return None
    stored = await _db(_store, thread_id, record, title)
    if stored is None:
        logger.info("thread %s: title record changed meanwhile; generated title dropped", thread_id)
        return None
    await _publish_head(stored)
    return title


def _load_if_due(thread_id: str, run_id: str) -> _Loaded | None:
    """The thread, run and title record when a title is due (AD-043..AD-045), else None."""
    thread = Thread.objects.filter(id=thread_id).first()
    if thread is None:
        return None
    try:
        config = registry.get_agent(thread.agent_name).thread_titles
    except registry.AgentNotFound:
        return None
    if config is None:
        return None
    record = _record(thread)
    once_done = config.generate == "once" and record.generated_at is not None
    if once_done or not config.may_replace(record):
        return None  # no count can make it due: skip the counting queries
    run = Run.objects.filter(id=run_id, thread_id=thread_id).first()
    if run is None or run.status != Run.Status.COMPLETED:
        return None
    record = _record(
        thread,
        runs=Run.objects.filter(thread_id=thread_id, status=Run.Status.COMPLETED).count(),
        messages=_transcript_rows(thread_id).count(),
    )
    if not config.due(record, timezone.now()):
        return None
    return _Loaded(thread=thread, run=run, record=record)


def _record(thread: Thread, *, runs: int = 0, messages: int = 0) -> TitleRecord:
    return TitleRecord(
        title=thread.title,
        source=thread.title_source,
        generated_at=thread.title_generated_at,
        runs=runs,
        messages=messages,
        runs_at_generation=thread.title_runs,
        messages_at_generation=thread.title_messages,
    )


def _transcript_rows(thread_id: str) -> Any:
    return Message.objects.filter(
        thread_id=thread_id, in_transcript=True, status=Message.Status.COMMITTED
    )


def _transcript(thread_id: str) -> list[UIMessage]:
    rows = _transcript_rows(thread_id).order_by("-id")
    newest = rows.values_list("message_id", "role", "parts")[:TRANSCRIPT_MESSAGES]
    return [
        {"id": message_id, "role": role, "parts": parts}
        for message_id, role, parts in reversed(list(newest))
    ]


def _store(thread_id: str, before: TitleRecord, title: str) -> Thread | None:
    """Store a generated title if the record is still ``before``: a rename or another job
    in between wins (AD-045)."""
    now = timezone.now()
    unchanged = Thread.objects.filter(
        id=thread_id,
        title=before.title,
        title_source=before.source,
        title_generated_at=before.generated_at,
    )
    updated = unchanged.update(
        title=title,
        title_source="generated",
        title_generated_at=now,
        title_runs=before.runs,
        title_messages=before.messages,
        updated_at=now,
    )
    return Thread.objects.filter(id=thread_id).first() if updated else None


async def _publish_head(thread: Thread) -> None:
    await publish_now(thread.id, [thread_updated(thread)])
