"""The thread websocket: ``ws/pai/threads/<thread_id>/`` (protocol in docs/realtime.md).

On connect: authenticate with the HTTP API's resolver, authorize the thread (another
scope's thread is refused exactly like a missing one: error frame, close 4404), join the
thread's group, then send a snapshot (or, with ``?since=<seq>``, the missed events), the
active generation's replay and ``synced``. Live events follow, each once and in order.
Client frames are commands (:mod:`.commands`); a malformed frame gets a typed error and
changes nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from pai_threads import services
from pai_threads.errors import NotFound
from pai_threads.identity import Identity
from pai_threads.realtime.buffers import get_buffer
from pai_threads.realtime.commands import run_command
from pai_threads.realtime.conf import realtime_setting
from pai_threads.realtime.identity import resolve_scope_identity
from pai_threads.realtime.notify import MESSAGE_TYPE, group_name, register_subscriber_loop
from pai_threads.realtime.projections import build_snapshot
from pai_threads.realtime.sync import Cursor, Resync, open_frames

__all__ = ["ThreadConsumer"]

logger = logging.getLogger("pai.realtime")

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


def _since(scope: dict[str, Any]) -> int | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin1")).get("since")
    try:
        return int(values[0]) if values else None
    except ValueError:
        return None


class ThreadConsumer(AsyncJsonWebsocketConsumer):
    """One client on one thread."""

    identity: Identity | None = None
    thread_id: str = ""
    cursor: Cursor | None = None

    async def connect(self) -> None:
        self.thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        self._lock = asyncio.Lock()  # one writer: live delivery, commands and the watchdog
        self._watchdog: asyncio.Task[None] | None = None
        self._joined = False
        await self.accept()
        self.identity = await database_sync_to_async(resolve_scope_identity)(self.scope)
        if self.identity is None:
            await self._refuse("unauthenticated", "Authentication required.", 4401)
            return
        try:
            await database_sync_to_async(services.get_thread)(self.identity, self.thread_id)
        except NotFound as exc:
            await self._refuse(exc.code, exc.message, CLOSE_NOT_FOUND)
            return
        register_subscriber_loop()
        await self.channel_layer.group_add(group_name(self.thread_id), self.channel_name)
        self._joined = True
        async with self._lock:
            await self._catch_up_client(_since(self.scope))
        self._watchdog = asyncio.create_task(self._watch())

    async def disconnect(self, code: int) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        if self._joined:
            self._joined = False
            await self.channel_layer.group_discard(group_name(self.thread_id), self.channel_name)

    async def _refuse(self, code: str, message: str, close_code: int) -> None:
        await self.send_json({"type": "error", "code": code, "message": message})
        await self.close(code=close_code)

    # -- delivery ------------------------------------------------------------------------

    async def _catch_up_client(self, since: int | None) -> None:
        """Snapshot or resume, replay, ``synced``; then live delivery continues from there."""
        assert self.identity is not None
        identity = self.identity

        async def load() -> dict[str, Any]:
            return await database_sync_to_async(build_snapshot)(identity, self.thread_id)

        buffer = get_buffer()
        frames, last = await open_frames(buffer, self.thread_id, since=since, load_snapshot=load)
        self.cursor = Cursor(buffer=buffer, thread_id=self.thread_id, last=last)
        for frame in frames:
            await self.send_json(frame)

    async def _deliver(self, fetch: Any) -> None:
        async with self._lock:
            if self.cursor is None or not self._joined:
                return
            try:
                events = await fetch(self.cursor)
            except Resync as exc:
                logger.info("resyncing a client of thread %s: %s", self.thread_id, exc)
                try:
                    await self._catch_up_client(None)
                except NotFound as gone:
                    await self._refuse(gone.code, gone.message, CLOSE_NOT_FOUND)
                return
            for event in events:
                await self.send_json(event)

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes stale database connections (a thread hop) before every handler;
        # a live batch touches no database (a resync's snapshot read hops on its own), and
        # it arrives once per flush per subscriber: skip the hop on that path.
        if message.get("type") == MESSAGE_TYPE:
            await self.pai_events(message)
        else:
            await super().dispatch(message)

    async def pai_events(self, message: dict[str, Any]) -> None:
        """A live batch from the thread's group (``type: pai.events``)."""
        events = message["events"]
        await self._deliver(lambda cursor: cursor.admit(events))

    async def _watch(self) -> None:
        """Refill events whose group message was dropped while nothing followed them."""
        while True:
            await asyncio.sleep(float(realtime_setting("REALTIME_RESYNC_SECONDS")))
            try:
                await self._deliver(lambda cursor: cursor.catch_up())
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("realtime catch-up failed on thread %s", self.thread_id)

    # -- client frames -------------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.identity is None or not self._joined:
            return
        if text_data is None:
            await self._error("invalid_frame", "Frames must be JSON text, not binary.")
            return
        limit = int(realtime_setting("REALTIME_MAX_FRAME_BYTES"))
        if len(text_data.encode("utf-8", "surrogatepass")) > limit:
            await self._error("frame_too_large", f"Frames must be at most {limit} bytes.")
            return
        try:
            frame = json.loads(text_data)
        except ValueError:
            await self._error("invalid_json", "The frame is not valid JSON.")
            return
        if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
            await self._error("invalid_frame", "A frame is a JSON object with a string 'type'.")
            return
        request_id = frame.get("requestId")
        if request_id is not None and not isinstance(request_id, str | int):
            await self._error("invalid_frame", "'requestId' must be a string or a number.")
            return
        await self._client_frame(frame)

    async def _client_frame(self, frame: dict[str, Any]) -> None:
        kind = frame["type"]
        if kind == "ping":
            await self.send_json({"type": "pong", "requestId": frame.get("requestId")})
        elif kind in ("resume", "sync"):
            since = frame.get("since") if kind == "resume" else None
            if since is not None and (not isinstance(since, int) or isinstance(since, bool)):
                await self._error("invalid_frame", "'since' must be an integer.")
                return
            async with self._lock:
                await self._catch_up_client(since)
        else:
            assert self.identity is not None
            await self.send_json(await run_command(self.identity, self.thread_id, frame))

    async def _error(self, code: str, message: str) -> None:
        await self.send_json({"type": "error", "code": code, "message": message})
