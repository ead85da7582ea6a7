"""Routing the ToolData writes of running tool calls into their generation.

A tool's ``ctx.data.write(...)`` becomes a ``data-pai-tool-data`` chunk of the assistant
message whose calls are running: folded by the same reducer and published in the same
sequenced envelope as every other chunk, at the moment it is written (TH-037), so it
precedes the call's result. One :class:`ToolDataHub` per generation serialises the writes of
concurrent calls (one chunk index each, never interleaved mid-publish) and checkpoints durable
records into the stored step message while the tools run, at most every
``checkpoint_seconds`` and once more after the last write (MF-020, MF-030); the result's
commit stores the final state anyway. A failed checkpoint is logged, never the tool's error.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from pai_agents.engine.store import Lease, ThreadStore
from pai_agents.messages.reducer import MessageReducer
from pai_agents.messages.types import UIMessageChunk
from pai_agents.tool_data import ToolData, ToolDataClosed

__all__ = ["ToolDataHub", "tool_data_hub"]

logger = logging.getLogger("pai.engine")


class _Generation(Protocol):
    tool_data: Any
    reducer: MessageReducer

    async def emit(self, *chunks: UIMessageChunk) -> None: ...


class ToolDataHub:
    """The ToolData writers of one generation's running calls."""

    def __init__(
        self,
        emit: Callable[[UIMessageChunk], Awaitable[None]],
        checkpoint: Callable[[], Awaitable[None]],
        *,
        interval: float,
    ) -> None:
        self._emit = emit
        self._checkpoint = checkpoint
        self._interval = max(0.0, interval)
        self._lock = asyncio.Lock()  # one write at a time, so chunk order = write order
        self._saving = asyncio.Lock()
        self._open: dict[str, ToolData] = {}
        self._dirty = False
        self._broken = False
        self._last_save = -math.inf
        self._timer: asyncio.Future[None] | None = None

    def writer(self, tool_call_id: str) -> ToolData:
        """The ``ctx.data`` of a call about to execute."""
        writer = ToolData(tool_call_id, emit=lambda chunk: self._write(tool_call_id, chunk))
        self._open[tool_call_id] = writer
        return writer

    async def release(self, tool_call_ids: Iterable[str]) -> None:
        """The calls have results: close their writers (after a write in progress), and
        once none is open, drop the pending checkpoint and wait for one being stored."""
        async with self._lock:
            for call_id in tool_call_ids:
                writer = self._open.pop(call_id, None)
                if writer is not None:
                    writer.close()
        if self._open:
            return
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            await asyncio.gather(timer, return_exceptions=True)
        async with self._saving:  # the step's next write must not race a checkpoint
            self._dirty = False

    async def _write(self, call_id: str, chunk: UIMessageChunk) -> None:
        # Shielded: a cancelled tool never leaves a chunk half-published.
        await asyncio.shield(self._publish(call_id, chunk))
        if chunk.get("transient") is not True:
            self._dirty = True
            await self._schedule_save()

    async def _publish(self, call_id: str, chunk: UIMessageChunk) -> None:
        async with self._lock:
            if call_id not in self._open:
                raise ToolDataClosed(f"tool call {call_id} has finished; its data is final")
            await self._emit(chunk)

    async def _schedule_save(self) -> None:
        if self._broken or self._timer is not None:
            return  # a trailing checkpoint will store this record
        wait = self._last_save + self._interval - asyncio.get_running_loop().time()
        if wait <= 0:
            await asyncio.shield(self._save())  # stored by the time the write returns
        else:
            self._timer = asyncio.ensure_future(self._trailing(wait))

    async def _trailing(self, wait: float) -> None:
        await asyncio.sleep(wait)
        self._timer = None
        await asyncio.shield(self._save())

    async def _save(self) -> None:
        async with self._saving:
            if not self._dirty or self._broken:
                return
            self._dirty = False
            self._last_save = asyncio.get_running_loop().time()
            try:
                await self._checkpoint()
            except Exception:
                # The result's commit stores the records (or finds the lease lost) anyway.
                self._broken = True
                logger.warning("could not checkpoint tool data", exc_info=True)


def tool_data_hub(
    generation: _Generation, store: ThreadStore, lease: Lease, *, interval: float
) -> ToolDataHub:
    """The generation's hub, made on first use. Checkpoints store a copy of the message as
    it is when they start (tools keep writing meanwhile)."""
    hub = generation.tool_data
    if hub is None:

        async def checkpoint() -> None:
            await store.update_message(lease, message=generation.reducer.snapshot())

        hub = generation.tool_data = ToolDataHub(generation.emit, checkpoint, interval=interval)
    assert isinstance(hub, ToolDataHub)
    return hub
