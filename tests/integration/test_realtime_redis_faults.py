"""Realtime through Redis faults: a private redis-server, daphne on the Redis channel layer
and replay buffer, real websocket clients.

* An idle socket and a busy one stay open past 30 s. Before the fix, channels-redis'
  5 s ``BZPOPMIN`` raced redis-py 8's default 5 s socket timeout, ``receive`` raised
  ``TimeoutError: Timeout reading from ...`` and daphne closed the socket with 1011.
* With channels-redis' own layer (no socket-timeout fix) the read timeouts still happen,
  and the consumer rides them out: the socket stays open.
* Redis restarted (down, back empty on the same port) in the middle of a streaming run: the
  watching socket stays open, gets a fresh snapshot (the resync), its group membership is
  back, it ends with exactly the stored messages, and a later run streams live again; a
  client that was away reconnects with ``?since=`` and ends with the stored messages too.

The Redis server is the test's own (never the shared one, which other tests use).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from tests.support.private_redis import PrivateRedis
from tests.support.realtime import recv, recv_until, start_server
from tests.support.server import Browser, DaphneServer
from tests.support.thread_state import ThreadState
from tests.support.ws_agents import steady_answer
from tests.support.ws_probe import assert_clean_log, ping

# Idle sockets for half a minute and a Redis restart: backend-independent, so one pass.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.redis,
    pytest.mark.once,
    pytest.mark.django_db(transaction=True),
]

IDLE_SECONDS = 32.0  # more than six of channels-redis' 5 s blocking pops
DOWN_SECONDS = 2.0
TERMINAL = ("completed", "failed", "cancelled", "waiting")


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    server = PrivateRedis(Path(tmp_path_factory.mktemp("private-redis"))).start()
    try:
        yield server
    finally:
        server.stop()


def _server(request: pytest.FixtureRequest, name: str, redis: PrivateRedis, **env: str) -> Any:
    return start_server(
        request,
        request.getfixturevalue("tmp_path_factory"),
        request.getfixturevalue("django_db_blocker"),
        name,
        DJANGO_SETTINGS_MODULE="tests.support.ws_settings",
        PAI_TEST_REALTIME_REDIS_URL=redis.url,
        **env,
    )


@pytest.fixture(scope="module")
def server(
    request: pytest.FixtureRequest, django_db_setup: None, redis_server: PrivateRedis
) -> Iterator[DaphneServer]:
    yield from _server(request, "realtime-redis-faults", redis_server)


@pytest.fixture(scope="module")
def plain_server(
    request: pytest.FixtureRequest, django_db_setup: None, redis_server: PrivateRedis
) -> Iterator[DaphneServer]:
    yield from _server(
        request, "realtime-plain-channels-redis", redis_server, PAI_TEST_PLAIN_CHANNELS_REDIS="1"
    )


def _without_times(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = json.loads(json.dumps(messages))
    for message in out:
        message["metadata"]["pai"].pop("createdAt", None)
        message["metadata"]["pai"].pop("updatedAt", None)
    return out


def _run_ended(state: ThreadState, run_id: str) -> Any:
    def done(frame: dict[str, Any]) -> bool:
        run = state.runs.get(run_id)
        return run is not None and run.get("status") in TERMINAL

    return done


async def _idle(ws: ClientConnection, seconds: float) -> list[dict[str, Any]]:
    """Everything the server sends within ``seconds`` (fails if it closes the socket)."""
    frames: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (left := deadline - loop.time()) > 0:
        try:
            frames.append(await recv(ws, timeout=left))
        except TimeoutError:
            break
    return frames


async def test_idle_and_busy_sockets_outlive_the_blocking_pop(server: DaphneServer) -> None:
    """Issue 15: no 1011 on a healthy idle or busy connection under channels-redis."""
    async with Browser(server) as alice:
        quiet = await alice.create_thread("echo")
        busy = await alice.create_thread("steady")
        state = ThreadState()
        async with alice.websocket(quiet) as idle_ws, alice.websocket(busy) as busy_ws:
            started = time.monotonic()
            await recv_until(idle_ws, lambda f: f["type"] == "synced")
            await recv_until(busy_ws, lambda f: f["type"] == "synced", sink=state.apply)
            await busy_ws.send(json.dumps({"type": "send", "text": "stream a while"}))
            ack = (await recv_until(busy_ws, lambda f: f["type"] == "ack", sink=state.apply))[-1]
            await recv_until(busy_ws, _run_ended(state, ack["run"]["id"]), sink=state.apply)
            idle_frames = await _idle(idle_ws, IDLE_SECONDS - (time.monotonic() - started))
            assert not await ping(idle_ws), "an idle socket got nothing and still answers"
            await ping(busy_ws)
        stored = _without_times(await alice.messages(busy))

    assert idle_frames == []
    assert state.transcript() == stored
    assert stored[-1]["parts"][-1]["text"] == steady_answer()
    log = server.log_text()
    assert "Timeout reading" not in log and "receive timed out" not in log, log[-3000:]
    assert_clean_log(server)


async def test_stock_channels_redis_read_timeouts_do_not_close_the_socket(
    plain_server: DaphneServer,
) -> None:
    """With channels-redis' own layer a read timeout can end the blocking pop (redis-py's
    5 s default loses the race now and then; this server's 2 s timeout always does): the
    consumer retries the receive instead of dying with 1011."""
    async with Browser(plain_server) as alice:
        thread_id = await alice.create_thread("echo")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            assert await _idle(ws, 12.0) == []
            await ws.send(json.dumps({"type": "send", "text": "still live?"}))
            frames = await recv_until(ws, lambda f: f.get("status") == "completed")
    assert any(f["type"] == "generation.finished" for f in frames)
    assert "channel layer receive timed out" in plain_server.log_text()
    assert_clean_log(plain_server)


async def test_redis_restart_mid_stream(server: DaphneServer, redis_server: PrivateRedis) -> None:
    """Issue 15: Redis restarts (empty) while a run streams. The watching socket stays
    open and resyncs, rejoins the thread's group, ends with exactly the stored messages and
    streams the next run live; a client that was away resumes with ``?since=`` exactly."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("steady")
        state, away = ThreadState(), ThreadState()
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced", sink=state.apply)
            async with alice.websocket(thread_id) as other:
                await recv_until(other, lambda f: f["type"] == "synced", sink=away.apply)
                await ws.send(json.dumps({"type": "send", "text": "stream through it"}))
                await recv_until(
                    other, lambda f: f.get("index", 0) >= 10, sink=away.apply, timeout=30
                )
            ack = (await recv_until(ws, lambda f: f["type"] == "ack", sink=state.apply))[-1]
            run_id = ack["run"]["id"]
            await recv_until(ws, lambda f: f.get("index", 0) >= 20, sink=state.apply)

            before = len(state.frames)
            redis_server.stop()
            await asyncio.sleep(DOWN_SECONDS)
            redis_server.start()
            await recv_until(ws, _run_ended(state, run_id), sink=state.apply, timeout=60)
            after_restart = state.frames[before:]
            await asyncio.sleep(1.0)  # a watchdog tick or two: membership re-asserted
            members = redis_server.client().zcard(f"asgi:group:pai.thread.{thread_id}")

            await ws.send(json.dumps({"type": "send", "text": "and once more"}))
            frames = await recv_until(ws, lambda f: f.get("status") == "completed", timeout=60)
            for frame in frames:
                state.apply(frame)
            stored = _without_times(await alice.messages(thread_id))

        async with alice.websocket(thread_id, since=away.seq) as back:
            await recv_until(back, lambda f: f["type"] == "synced", sink=away.apply)

    assert any(f["type"] == "snapshot" for f in after_restart), "the client was resynced"
    assert members >= 1, "the socket is back in its thread's group"
    assert state.transcript() == stored
    assert away.transcript() == stored
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
    second = [f for f in frames if f["type"] == "generation.message.chunk"]
    assert [f["index"] for f in second] == list(range(len(second))), "streamed live again"
    assert second and all(not f.get("replay") for f in second)
    assert_clean_log(server)


async def test_refused_with_4503_while_redis_is_down(
    server: DaphneServer, redis_server: PrivateRedis
) -> None:
    """Connecting while the channel layer is down: the typed ``service_unavailable`` frame
    and close 4503 (retry later; applications cannot send 1013), not 1011; after Redis is
    back, connecting works."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("echo")
        redis_server.stop()
        try:
            async with alice.websocket(thread_id) as ws:
                frame = await recv(ws, timeout=60)
                with pytest.raises(ConnectionClosed) as closed:
                    await recv(ws, timeout=60)
        finally:
            redis_server.start()
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced", timeout=30)

    assert frame["type"] == "error" and frame["error"]["code"] == "service_unavailable"
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4503
    assert_clean_log(server)
