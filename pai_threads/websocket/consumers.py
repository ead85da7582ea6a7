"""The thread websocket: ``ws/pai/threads/<thread_id>/`` (protocol in docs/realtime.md).

On connect: authenticate with the HTTP API's resolver, authorize the thread (another
scope's thread is refused exactly like a missing one: error frame, close 4404), join the
thread's group, then send a snapshot (or, with ``?since=<seq>``, the missed events), the
active generation's replay and ``synced``. Live events follow, each once and in order.

Client frames are commands (:mod:`.commands`). Anything a client sends is answered, never
fatal: a bad frame gets the typed error frame (:mod:`.frames`) and changes nothing else.
Channel-layer faults are not fatal either (:mod:`.link`): receives are retried, the group
membership is refreshed on every watchdog tick, and after an outage the client gets a
fresh snapshot. Only an unhandled bug ends a socket with 1011 (Channels does that).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from channels.sessions import InstanceSessionWrapper

from pai_threads import services
from pai_threads.errors import NotFound
from pai_threads.identity import Identity
from pai_threads.realtime.buffers import get_buffer
from pai_threads.realtime.conf import realtime_setting
from pai_threads.realtime.link import LayerLink, Outage, retry_transport
from pai_threads.realtime.notify import MESSAGE_TYPE, group_name, register_subscriber_loop
from pai_threads.realtime.sync import Cursor, FoldGuard, Resync, open_frames
from pai_threads.store.db import run_db
from pai_threads.websocket.commands import run_command
from pai_threads.websocket.frames import (
    FrameError,
    encode_frame,
    error_frame,
    exception_frame,
    parse_frame,
    request_id_of,
    unavailable_frame,
)
from pai_threads.websocket.identity import resolve_scope_identity
from pai_threads.websocket.snapshot import build_snapshot
from pai_threads.websocket.transport import frame_writer, write_eagerly

__all__ = ["ThreadConsumer"]

logger = logging.getLogger("pai.realtime")

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
# Applications may only close with 1000 or 3000-4999 (autobahn refuses 1011 and 1013):
CLOSE_SERVER_ERROR = 4500  # the server is misconfigured: no channel layer
CLOSE_UNAVAILABLE = 4503  # a dependency (the channel layer) is down at connect: retry

# A reset pooled connection (Redis just restarted) fails one call: retry before refusing.
CONNECT_ATTEMPTS = 4

Frame = dict[str, Any]


def _frame_sender(send: Callable[[dict[str, Any]], Awaitable[None]]) -> Any:
    """The send for ``websocket.send`` messages: under Channels' session middleware, the
    server's own. The middleware's send only acts on ``http.response.start`` (it saves the
    session); for every other message it read the lazy session twice, a twentieth of the
    server's CPU per delivered delta."""
    while isinstance(wrapper := getattr(send, "__self__", None), InstanceSessionWrapper):
        send = wrapper.real_send
    return send


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
    link: LayerLink | None = None
    # Set once the server refused a send: the client is gone, its disconnect not yet seen.
    gone: bool = False
    # Daphne's synchronous text-frame write (None on another server), and the same when
    # live batches may be written where the channel layer receives them (PAI's layers).
    _write_text: Callable[[str], None] | None = None
    _write_now: Callable[[str], None] | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Channels' ``AsyncConsumer.__call__`` with the channel receive through
        :class:`LayerLink`: Channels awaits ``layer.receive`` bare, so one Redis read
        timeout would end the consumer and close the socket with 1011."""
        self.scope = scope
        self._server_send = send
        self._frame_send = _frame_sender(send)
        write_eagerly(self._frame_send)  # daphne: each frame to the socket at once
        self._write_text = frame_writer(self._frame_send)
        self.base_send = self._send_to_server
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        self._turn = asyncio.Lock()  # one handler at a time (see _serve)
        self._lock = asyncio.Lock()  # one writer: live delivery, commands and the watchdog
        sources: list[Callable[[], Awaitable[Any]]] = [receive]
        # PAI's layers (in-memory, Redis) offer live batches to an attached receiver.
        attachable = callable(getattr(self.channel_layer, "attach", None))
        if self.channel_layer is not None:
            self.channel_name = await self.channel_layer.new_channel()
            self.thread_id = scope["url_route"]["kwargs"]["thread_id"]
            self.link = LayerLink(self.channel_layer, self.channel_name, group_name(self.thread_id))
            sources.append(self.link.receive)
            self._write_now = self._write_text if attachable else None
            if self._write_now is not None:
                self.channel_layer.attach(self.channel_name, self._take_live)
        try:
            with contextlib.suppress(StopConsumer):
                await self._serve(sources)
        finally:
            if self._write_now is not None:
                self.channel_layer.detach(self.channel_name)

    async def _serve(self, sources: list[Callable[[], Awaitable[Any]]]) -> None:
        """Dispatch what every source yields, one handler at a time (as Channels'
        ``await_many_dispatch`` does), each source read in order by its own task.

        Channels' loop starts a task and an ``asyncio.wait`` per message: on the live path
        (one message per delta per subscriber) that was a tenth of the server's CPU."""
        turn = self._turn

        async def serve(source: Callable[[], Awaitable[Any]]) -> None:
            while True:
                message = await source()
                async with turn:
                    await self.dispatch(message)

        tasks = [asyncio.ensure_future(serve(source)) for source in sources]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # StopConsumer after a disconnect, or a bug (Channels: 1011)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def connect(self) -> None:
        self.thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        self._watchdog: asyncio.Task[None] | None = None
        self._joined = False
        self._guard = FoldGuard()
        self._buffer_outage = Outage(f"replay buffer reads of thread {self.thread_id}")
        await self.accept()
        if self.link is None:
            logger.error("the thread websocket needs a channel layer: set CHANNEL_LAYERS")
            await self._refuse("server_error", "Realtime is not configured.", CLOSE_SERVER_ERROR)
            return
        try:
            self.identity = await database_sync_to_async(resolve_scope_identity)(self.scope)
            if self.identity is None:
                await self._refuse("unauthenticated", "Authentication required.", 4401)
                return
            await database_sync_to_async(services.get_thread)(self.identity, self.thread_id)
        except NotFound as exc:
            await self._refuse(exc.code, exc.message, CLOSE_NOT_FOUND)
            return
        except Exception as exc:  # the database is down (or a bug, logged): not a 1011
            self.identity = None
            refusal = exception_frame(exc)
            await self.send_json(refusal)
            unavailable = refusal["error"]["code"] == "service_unavailable"
            await self.close(code=CLOSE_UNAVAILABLE if unavailable else CLOSE_SERVER_ERROR)
            return
        register_subscriber_loop()
        try:
            await retry_transport(self._subscribe, attempts=CONNECT_ATTEMPTS)
        except Exception as exc:
            Outage(f"connecting a client of thread {self.thread_id}").failed(exc)
            await self.link.leave()
            self._joined = False
            await self.send_json(unavailable_frame())
            await self.close(code=CLOSE_UNAVAILABLE)
            return
        self._watchdog = asyncio.create_task(self._watch())

    async def _subscribe(self) -> None:
        assert self.link is not None
        await self.link.join()
        async with self._lock:
            self._joined = True
            await self._catch_up_client(_since(self.scope))

    async def disconnect(self, code: int) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        self._joined = False
        if self.link is not None:
            await self.link.leave()

    async def _send_to_server(self, message: dict[str, Any]) -> None:
        """The server's send, quiet once the client is gone: an event can reach this consumer
        between the connection's loss (e.g. daphne dropping an oversize frame's socket) and
        its ``websocket.disconnect``, and daphne then raises ``Disconnected``."""
        if self.gone:
            return
        send = self._frame_send if message["type"] == "websocket.send" else self._server_send
        try:
            await send(message)
        except Exception as exc:  # the server's own error type: daphne, uvicorn, ... differ
            self._lost(exc)

    async def _send_text(self, text: str) -> None:
        """One text frame: daphne's write without its coroutine and message when there is
        one (every live frame of the Redis arrangement comes this way)."""
        write = self._write_text
        if write is None:
            await self._send_to_server({"type": "websocket.send", "text": text})
            return
        if self.gone:
            return
        try:
            write(text)
        except Exception as exc:  # as in _send_to_server
            self._lost(exc)

    def _lost(self, exc: Exception) -> None:
        """The server refused a send: the client is gone (its disconnect not yet seen)."""
        self.gone = True
        self._joined = False
        logger.debug("thread %s: send to a closed socket (%r)", self.thread_id, exc)

    async def _refuse(self, code: str, message: str, close_code: int) -> None:
        await self.send_json(error_frame(code, message))
        await self.close(code=close_code)

    # -- delivery ------------------------------------------------------------------------

    async def _send_frames(self, frames: list[Frame]) -> None:
        for frame in frames:
            if self.gone:
                return
            if self._guard.admit(frame):
                # send_json's own chain (encode_json, send, base_send) with one call per frame.
                await self._send_text(encode_frame(frame))
            if frame.get("type") == "thread.deleted":
                # Nothing can follow (no snapshot of a deleted thread): end like a refusal.
                self._joined = False
                await self.close(code=CLOSE_NOT_FOUND)
                return

    async def _catch_up_client(self, since: int | None) -> None:
        """Snapshot or resume, replay, ``synced``; then live delivery continues from there."""
        assert self.identity is not None
        identity = self.identity

        async def load() -> dict[str, Any]:
            return await run_db(build_snapshot, identity, self.thread_id)  # kept connections

        buffer = get_buffer()
        frames, last = await open_frames(buffer, self.thread_id, since=since, load_snapshot=load)
        self.cursor = Cursor(buffer=buffer, thread_id=self.thread_id, last=last)
        self._guard.reset()
        await self._send_frames(frames)

    async def _resync(self, reason: object) -> None:
        logger.info("resyncing a client of thread %s: %s", self.thread_id, reason)
        try:
            await self._catch_up_client(None)
        except NotFound as gone:
            await self._refuse(gone.code, gone.message, CLOSE_NOT_FOUND)

    async def _deliver(self, fetch: Callable[[Cursor], Awaitable[list[Any]]]) -> None:
        """Send what ``fetch`` admits; a buffer fault leaves the cursor for a later retry."""
        async with self._lock:
            if self.cursor is None or not self._joined:
                return
            try:
                events = await fetch(self.cursor)
            except Resync as exc:
                await self._resync(exc)
                return
            except Exception as exc:
                self._buffer_outage.failed(exc)
                if self.link is not None:
                    self.link.mark_lost()
                return
            self._buffer_outage.recovered()
            await self._send_frames(events)

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes stale database connections (a thread hop) before every handler;
        # a live batch touches no database (a resync's snapshot read hops on its own), and
        # it arrives once per flush per subscriber: skip the hop on that path.
        if message.get("type") == MESSAGE_TYPE:
            await self.pai_events(message)
        else:
            await super().dispatch(message)

    def _take_live(self, message: dict[str, Any]) -> bool:
        """The channel layer offers a live batch (nothing of this channel is queued): in
        process in the fan-out, with Redis in the process's read loop. It is
        written right here when it is the cursor's next numbers and this consumer has
        nothing in flight (no handler running, no writer, no received message waiting
        for its turn), else declined and queued for :meth:`pai_events`, in order. Saves
        the queue, the task wake-up and the dispatch per batch per subscriber."""
        write, cursor, events = self._write_now, self.cursor, message["events"]
        if (
            write is None
            or cursor is None
            or not self._joined
            or self.gone
            or self._turn.locked()
            or self._lock.locked()
        ):
            return False
        for event in events:
            if event.get("type") == "thread.deleted":
                return False
        if not cursor.admit_next(events):
            return False
        self._buffer_outage.recovered()
        guard = self._guard
        try:
            for event in events:
                if guard.admit(event):
                    write(encode_frame(event))
        except Exception as exc:  # the server's own error: as in _send_to_server
            self._lost(exc)
        return True

    async def pai_events(self, message: dict[str, Any]) -> None:
        """A live batch from the thread's group (``type: pai.events``)."""
        events = message["events"]
        await self._deliver(lambda cursor: cursor.admit(events))

    async def _watch(self) -> None:
        """Each tick: re-assert the group membership (a restarted Redis forgot it), then
        refill events whose group message was dropped while nothing followed them; after a
        channel-layer outage, a fresh snapshot instead."""
        assert self.link is not None
        while True:
            await asyncio.sleep(float(realtime_setting("REALTIME_RESYNC_SECONDS")))
            try:
                recovered = await self.link.refresh()
                if recovered is None:
                    continue
                if recovered:
                    async with self._lock:
                        await self._resync("the channel layer recovered from an outage")
                else:
                    await self._deliver(lambda cursor: cursor.catch_up())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._buffer_outage.failed(exc)
                self.link.mark_lost()

    # -- client frames -------------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.identity is None or not self._joined:
            return
        limit = int(realtime_setting("REALTIME_MAX_FRAME_BYTES"))
        try:
            frame = parse_frame(text_data, bytes_data, limit=limit)
        except FrameError as exc:
            await self.send_json(exc.frame())
            return
        try:
            await self._client_frame(frame)
        except Exception as exc:
            # Not the client's doing (its input was checked): a server fault, described
            # (and a bug logged) as the HTTP API does. The connection stays open.
            await self.send_json(exception_frame(exc, request_id_of(frame)))

    async def _client_frame(self, frame: Frame) -> None:
        kind = frame["type"]
        request_id = request_id_of(frame)
        if kind == "ping":
            await self.send_json({"type": "pong", "requestId": request_id})
        elif kind in ("resume", "sync"):
            since = frame.get("since") if kind == "resume" else None
            if since is not None and (not isinstance(since, int) or isinstance(since, bool)):
                problem = "'since' must be an integer."
                await self.send_json(error_frame("invalid_frame", problem, request_id=request_id))
                return
            async with self._lock:
                try:
                    await self._catch_up_client(since)
                except NotFound as gone:
                    await self._refuse(gone.code, gone.message, CLOSE_NOT_FOUND)
                except Exception as exc:  # the buffer or the database is unreachable
                    self._buffer_outage.failed(exc)
                    await self.send_json(unavailable_frame(request_id))
        else:
            assert self.identity is not None
            await self.send_json(await run_command(self.identity, self.thread_id, frame))
