"""``ctx.data``: ToolData, the typed progress records a tool writes while it runs.

Models only ever see a tool's final value; people watching a run want more: progress, partial
(preliminary) results, the file being read. A tool writes such records on named channels::

    @tool(input=ImportInput)
    async def import_rows(args: ImportInput, ctx: ToolContext) -> dict:
        for done in range(0, args.rows, 100):
            await ctx.data.write("progress", {"pct": 100 * done // args.rows}, id="main")
        return {"imported": args.rows}

Clients see the records on the call's tool part, ``part["data"]["progress"]`` (a list in
write order). A record is durable by default: it is stored with the step message and
survives a refresh and recovery. ``transient=True`` records are live-only. Writing the same
``id`` on a channel again replaces that record's value in place; without ``id`` every write
is a new record. Sync tools (run in a worker thread) call :meth:`ToolData.write_sync`.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pai_agents.ids import new_id
from pai_agents.json import JsonValue, NotStrictJson, ensure_strict_json
from pai_agents.messages.tool_data import invalid_channel, invalid_record_id, tool_data_chunk
from pai_agents.messages.types import UIMessageChunk

__all__ = ["ToolData", "ToolDataClosed", "ToolDataRecord"]

Emit = Callable[[UIMessageChunk], Awaitable[None]]


class ToolDataClosed(RuntimeError):
    """A write after the tool call finished: its records are final."""


@dataclass(frozen=True, kw_only=True)
class ToolDataRecord:
    """One record as last written (identity: the call, ``channel`` and ``id``)."""

    channel: str
    id: str
    value: JsonValue
    transient: bool = False


class ToolData:
    """The ToolData writer of one tool call (``ctx.data``).

    Built by the engine for each executed call. One built without ``emit`` (a
    :class:`~pai_agents.tools.ToolContext` made by hand, e.g. to test a tool) only keeps
    what is written in :attr:`records`.
    """

    def __init__(self, tool_call_id: str = "", *, emit: Emit | None = None) -> None:
        self.tool_call_id = tool_call_id
        self._emit = emit
        # Sync tools run in worker threads and hand their writes to the run's event loop.
        self._loop = asyncio.get_running_loop() if emit is not None else None
        self._closed = False
        #: The latest record of each (channel, id) this call wrote, in first-write order.
        self.records: dict[tuple[str, str], ToolDataRecord] = {}

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """End the call's writes (the engine does, once the call has a result)."""
        self._closed = True

    async def write(
        self,
        channel: str,
        value: Any,
        *,
        id: str | None = None,
        transient: bool = False,
    ) -> str:
        """Publish a record on ``channel`` now; returns its id (generated when omitted).

        ``value`` must be strict JSON (it is copied). A durable record is stored with the
        step message (checkpointed while the tool runs, at most every
        ``RunEngine.checkpoint_seconds``, and always with the result); ``transient=True`` is
        live only: a durable write of the same id, the call's result, or a client's resync
        removes it. Raises ``ValueError`` for a bad channel, id or value and
        :class:`ToolDataClosed` once the call has finished.
        """
        record = self._record(channel, value, id, transient)
        if self._emit is not None:
            await self._emit(
                tool_data_chunk(
                    self.tool_call_id, record.channel, record.id, record.value, transient=transient
                )
            )
        self._keep(record)
        return record.id

    def write_sync(
        self,
        channel: str,
        value: Any,
        *,
        id: str | None = None,
        transient: bool = False,
    ) -> str:
        """:meth:`write` for a sync tool (``def execute``, run in a worker thread): blocks
        until the record is published. Async tools ``await write(...)`` instead."""
        if self._loop is None:
            record = self._record(channel, value, id, transient)
            self._keep(record)
            return record.id
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError("an async tool awaits ctx.data.write(...), not write_sync")
        future = asyncio.run_coroutine_threadsafe(
            self.write(channel, value, id=id, transient=transient), self._loop
        )
        return future.result()

    def _record(self, channel: str, value: Any, id: str | None, transient: bool) -> ToolDataRecord:
        if self._closed:
            raise ToolDataClosed(f"tool call {self.tool_call_id} has finished; its data is final")
        problem = invalid_channel(channel) or (None if id is None else invalid_record_id(id))
        if problem is not None:
            raise ValueError(problem)
        try:
            value = ensure_strict_json(value, what=f"ToolData {channel!r} value")
        except NotStrictJson as exc:
            raise ValueError(str(exc)) from exc
        return ToolDataRecord(
            channel=channel,
            id=id if id is not None else new_id("tdr"),
            value=copy.deepcopy(value),
            transient=bool(transient),
        )

    def _keep(self, record: ToolDataRecord) -> None:
        self.records[(record.channel, record.id)] = record
