"""The realtime :class:`EventSink`: number, buffer and fan out a thread's events.

Runs publish through a :class:`RealtimePublisher` (see :mod:`pai_threads.execution.execute`); thread
operations publish through :func:`pai_threads.events.publish_after_commit`. Both deliver
through :mod:`.delivery`: every event is appended to the thread's replay buffer, which
assigns its sequence number, then sent to the thread's group.

Deltas (text, reasoning, tool input) are coalesced on the leading edge: a delta goes out at
once when no delta was flushed in the last ``REALTIME_COALESCE_MS``; the deltas of a burst
that follow it wait for that window to close and go out as one batch (one buffer append and
one channel-layer message for many tokens). A paced model's tokens thus cost no added
latency, and a fast one's at most one window. Chunks are never merged or reordered, so the
published chunk sequence is exactly what the engine emitted (the same as
``pai_chat --jsonl`` prints). Any other event flushes the batch at once.

A step's ``finish`` chunk is held until its message is stored and goes out just before its
``generation.finished``, after a ``data-pai-suspension`` chunk per suspended call and
carrying the stored public metadata (:func:`pai_threads.events.ui_stream.step_end`, what
``pai_chat --jsonl`` prints too); a step that waits gets one as well. A client that folds a
generation's chunks with the AI SDK's own reducer thus rebuilds exactly the stored message,
metadata included. (One held chunk per step: no work per delta.)

A generation the run leaves open when it stops streaming (it failed before the step's
first checkpoint, or its open row was dropped) is closed here, before the run's status: an
``error`` (or ``abort``) chunk, a ``finish`` chunk, and ``generation.finished`` with the
stored message, ``None`` when nothing of it was stored. Every subscriber (websocket, SSE)
thus sees each generation end, and no client keeps an open shell of a run that ended.

Publishing is best effort by design: the database is the authority, and a client that
missed something resynchronises from a snapshot. A failing buffer never fails a run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from pai_agents.engine.events import (
    EventSink,
    RunEvent,
    generation_finished,
    generation_message_chunk,
)
from pai_agents.messages.projection import client_message
from pai_threads.events.projections import message_public, messages_out, run_public
from pai_threads.events.types import empty_side_state, run_status, side_state
from pai_threads.events.ui_stream import step_end
from pai_threads.models import Message, Run
from pai_threads.realtime import delivery
from pai_threads.realtime.buffers import ReplayBuffer, get_buffer
from pai_threads.realtime.conf import realtime_setting
from pai_threads.realtime.delivery import publish, publish_sync
from pai_threads.store.db import run_db
from pai_threads.store.run_facts import RunFacts

__all__ = ["RealtimePublisher", "TeeSink", "publish", "publish_sync"]

logger = logging.getLogger("pai.realtime")

_DELTA_CHUNKS = frozenset({"text-delta", "reasoning-delta", "tool-input-delta"})
_STREAMING = frozenset({"queued", "running"})


def _stored_message(thread_id: str, message_id: str) -> dict[str, Any] | None:
    row = Message.objects.filter(thread_id=thread_id, message_id=message_id).first()
    return message_public(row) if row is not None else None


def _public_run(run_id: str) -> dict[str, Any] | None:
    run = Run.objects.filter(id=run_id).first()
    return run_public(run) if run is not None else None


def _has_tool_parts(rows: Sequence[Message]) -> bool:
    return any(
        str(part.get("type", "")).startswith("tool-") or part.get("type") == "dynamic-tool"
        for row in rows
        for part in row.parts or ()
    )


async def _projected(rows: Sequence[Message], *, suspensions: bool) -> list[dict[str, Any]]:
    """Client projections of rows a write returned; the suspension join (a query) only
    when episodes may exist and there is a tool part to join them to."""
    if suspensions and _has_tool_parts(rows):
        return await run_db(messages_out, rows)
    return messages_out(rows, suspensions=False)


class RealtimePublisher:
    """The sink of one run on one thread. Call :meth:`aclose` when the run ends.

    ``facts``: the rows the execution's store wrote (``ORMThreadStore.facts``); events
    carry projections of those instead of rows read back. Without them, every projection
    is read from the database.
    """

    def __init__(
        self,
        thread_id: str,
        *,
        buffer: ReplayBuffer | None = None,
        coalesce_ms: float | None = None,
        facts: RunFacts | None = None,
    ) -> None:
        self.thread_id = thread_id
        self._facts = facts if facts is not None else RunFacts()
        self._buffer = buffer or get_buffer()
        delay = realtime_setting("REALTIME_COALESCE_MS") if coalesce_ms is None else coalesce_ms
        self._delay = max(0.0, float(delay)) / 1000
        self._pending: list[RunEvent] = []
        self._timer: asyncio.TimerHandle | None = None
        # Loop time of the last flush a delta started: deltas within ``delay`` of it coalesce.
        self._last_delta_flush = float("-inf")
        self._lock = asyncio.Lock()
        self._inline = delivery.in_process()
        self._flushes: set[asyncio.Task[None]] = set()
        # The reply of the last batch handed over without waiting (delivery.publish_nowait).
        self._handed: asyncio.Future[Any] | None = None
        # The generation announced and not finished yet: (run id, message id), next index.
        self._open: tuple[str, str] | None = None
        self._next_index = 0
        self._held: RunEvent | None = None  # the open generation's `finish`, until stored

    async def publish(self, event: RunEvent) -> None:
        if event.get("type") == "generation.message.chunk":
            # The hot path (one call per token): a chunk needs no projection.
            self._next_index = event["index"] + 1
            kind = event["chunk"].get("type")
            if self._held is not None:  # a chunk after the step's finish: keep the order
                self._pending.append(self._held)
                self._held = None
            if kind == "finish" and self._open == (event["runId"], event["messageId"]):
                self._held = event  # sent with the stored message's metadata
                return
            self._pending.append(event)
            if self._delay and kind in _DELTA_CHUNKS:
                self._coalesce()
                return
            await self.flush()
            return
        kind = event.get("type")
        if kind == "generation.started":
            if self._held is not None:  # (no generation.finished came for it)
                self._pending.append(self._held)
                self._held = None
            self._open, self._next_index = (str(event["runId"]), str(event["messageId"])), 0
        elif kind == "generation.finished":
            self._open = None
            self._pending += await self._finished(event)
            await self.flush()
            return
        enriched = await self._enrich(event)
        if kind == "run.status" and event.get("status") not in _STREAMING:
            self._pending += await self._close_open(enriched)
        self._pending.append(enriched)
        if kind == "run.status" and event.get("status") != "running":
            # A run that waits or ends may have created pending actions or admitted queued
            # input (a claim changes neither: no reads for it on the hot path). The ending
            # write returned whether the thread has either; none needs no read.
            try:
                if self._facts.take_sides_empty(str(event.get("runId"))):
                    self._pending += empty_side_state(self.thread_id)
                else:
                    self._pending += await run_db(side_state, self.thread_id)
            except Exception:
                logger.exception("could not read queue/actions of thread %s", self.thread_id)
        await self.flush()

    def _coalesce(self) -> None:
        """A delta: sent at once when none was sent in the last ``delay`` (a paced model's
        tokens each go out as they come), else with the burst when the window closes."""
        if self._timer is not None:
            return  # a burst: the window's flush takes it
        now = time.monotonic()  # asyncio's loop clock, without the loop lookup per token
        wait = self._last_delta_flush + self._delay - now
        if wait > 0:
            self._timer = asyncio.get_running_loop().call_later(wait, self._flush_later)
            return
        self._last_delta_flush = now
        self._flush_soon()

    async def _close_open(self, status: RunEvent) -> list[RunEvent]:
        """The events that end the generation ``status``'s run left open, if any."""
        if self._open is None or self._open[0] != status.get("runId"):
            return []
        run_id, message_id = self._open
        self._open = None
        error = (status.get("run") or {}).get("error") or {}
        if status.get("status") == "failed":
            text = str(error.get("message") or "The run failed.")
            cause: dict[str, Any] = {"type": "error", "errorText": text}
            finish: dict[str, Any] = {"type": "finish", "finishReason": "error"}
        else:
            cause = {"type": "abort", "reason": str(status.get("status"))}
            finish = {"type": "finish", "finishReason": "other"}
        if self._held is not None:  # its finish would come before the cause: this one replaces it
            self._next_index, self._held = self._held["index"], None
        stored = await self._stored_or_none(message_id)
        return [
            self._chunk_event(run_id, message_id, cause),
            *self._end_events(run_id, message_id, stored, finish),
        ]

    async def _finished(self, event: RunEvent) -> list[RunEvent]:
        """A generation ended: its held ``finish`` (or, for a step that waits, a new one)
        with the stored message's metadata, after its suspension records, then
        ``generation.finished`` with the stored message."""
        run_id, message_id = str(event["runId"]), str(event["messageId"])
        held, self._held = self._held, None
        if held is not None and held["messageId"] != message_id:
            return [held, *await self._finished(event)]  # (another generation's)
        stored = await self._stored_or_none(message_id)
        if stored is None:
            # Unenriched, the engine's message still reaches clients projected (MF-011).
            message = event.get("message")
            if isinstance(message, dict):
                event = {**event, "message": client_message(message)}
            return [*([held] if held is not None else []), event]
        if held is not None:
            self._next_index = held["index"]
        finish = held["chunk"] if held is not None else None
        return self._end_events(run_id, message_id, stored, finish)

    def _end_events(
        self,
        run_id: str,
        message_id: str,
        stored: dict[str, Any] | None,
        finish: dict[str, Any] | None,
    ) -> list[RunEvent]:
        """A generation's last chunks (:func:`step_end` of its stored message; ``finish``
        alone when nothing of it was stored) and its ``generation.finished``."""
        if stored is not None:
            chunks = step_end(stored, finish)
        else:
            chunks = [finish] if finish is not None else []
        return [
            *(self._chunk_event(run_id, message_id, chunk) for chunk in chunks),
            generation_finished(
                run_id=run_id, thread_id=self.thread_id, message_id=message_id, message=stored
            ),
        ]

    def _chunk_event(self, run_id: str, message_id: str, chunk: dict[str, Any]) -> RunEvent:
        event = generation_message_chunk(
            run_id=run_id,
            thread_id=self.thread_id,
            message_id=message_id,
            index=self._next_index,
            chunk=chunk,
        )
        self._next_index += 1
        return event

    async def _stored_or_none(self, message_id: str) -> dict[str, Any] | None:
        try:
            return await self._stored_message(message_id)
        except Exception:
            logger.exception("could not read message %s of thread %s", message_id, self.thread_id)
            return None

    async def announce_claim(self, run_id: str) -> None:
        """A worker claimed the run: its ``running`` status reaches subscribers before its
        first generation. (Its input was announced by the operation that committed it: the
        send, or the admission of queued input.)"""
        await self.publish(run_status(run_id=run_id, thread_id=self.thread_id, status="running"))

    async def _enrich(self, event: RunEvent) -> RunEvent:
        """Attach the stored, public projections clients need: of the rows the store's
        writes returned, else read (one read per message/run)."""
        kind = event.get("type")
        try:
            if kind == "run.status":
                written = self._facts.take_run(str(event["runId"]), event.get("status"))
                run = (
                    run_public(written)
                    if written is not None
                    else await run_db(_public_run, str(event["runId"]))
                )
                if run is not None:
                    return {**event, "status": run["status"], "run": run}
        except Exception:
            logger.exception("could not enrich %s for thread %s", kind, self.thread_id)
        if kind == "message.committed" and isinstance(event.get("message"), dict):
            # Steered input comes from the engine as stored: references as attachments (MF-014).
            return {**event, "message": client_message(event["message"])}
        return event

    async def _stored_message(self, message_id: str) -> dict[str, Any] | None:
        written = self._facts.take_message(message_id)
        if written is None:
            return await run_db(_stored_message, self.thread_id, message_id)
        row, suspensions = written
        [message] = await _projected([row], suspensions=suspensions)
        return message

    def _flush_later(self) -> None:
        self._timer = None
        self._last_delta_flush = time.monotonic()
        self._flush_soon()

    def _flush_soon(self) -> None:
        """Deliver the pending deltas without making the run wait for them: right here
        when delivery is in process (nothing in it waits), handed to the joint Redis
        script's queue (which sends this loop's batches in order), else in a task; the lock
        keeps batches in publish order."""
        if self._inline:
            if not self._lock.locked():
                batch, self._pending = self._pending, []
                if batch:
                    delivery.publish_inline(self.thread_id, batch)
                return
        else:
            if not self._pending:
                return
            # Taken and handed over in one step (as flush does on this path), so batches
            # leave in the order they were published, whoever holds the lock.
            batch, self._pending = self._pending, []
            handed = delivery.publish_nowait(self.thread_id, batch)
            if handed is not False:
                if handed is not True:
                    self._handed = handed
                return
            self._pending = batch  # nothing was done with it: a task publishes it
        task = asyncio.ensure_future(self.flush())
        self._flushes.add(task)  # owned here until done; aclose() awaits the stragglers
        task.add_done_callback(self._flushes.discard)

    async def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        async with self._lock:  # batches reach the buffer in publish order
            batch, self._pending = self._pending, []
            handed = self._handed
            if batch:
                await delivery.publish(self.thread_id, batch)  # queued after the handed ones
            elif handed is not None and not handed.done():
                # Batches handed over without waiting are queued in order, so the last one
                # out means all are: a flush returns once what was published before is out.
                await asyncio.wait([handed])
            if self._handed is handed:
                self._handed = None

    async def aclose(self) -> None:
        await self.flush()
        if self._flushes:
            await asyncio.gather(*self._flushes, return_exceptions=True)


class TeeSink:
    """Publishes every event to several sinks in order (e.g. a terminal and the realtime
    publisher, so a browser watches a ``pai_chat`` run live)."""

    def __init__(self, *sinks: EventSink) -> None:
        self.sinks = sinks

    async def publish(self, event: RunEvent) -> None:
        for sink in self.sinks:
            await sink.publish(event)
