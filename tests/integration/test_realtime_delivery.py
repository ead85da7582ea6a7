"""Delivery guarantees under the conditions that break naive fan-out.

* ``tight``: an in-memory channel layer with capacity 1, so ``group_send`` drops messages
  the way channels-redis does for a full channel; consumers must detect the gaps by
  sequence number and refill them from the replay buffer.
* ``redis``: the channel layer and the replay buffer on a real Redis server (the Lua
  append script, stream reads, and cross-loop fan-out from the executor).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from pai_agents.messages.reducer import reduce_chunks
from pai_threads.events.types import queue_changed
from pai_threads.realtime import delivery
from tests.support.realtime import recv_until, redis_realtime, start_server
from tests.support.server import Browser, DaphneServer
from tests.support.thread_state import ThreadState

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module", params=["tight", "redis"])
def server(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    django_db_setup: None,
    django_db_blocker: Any,
) -> Iterator[DaphneServer]:
    if request.param == "tight":
        env = {"PAI_TEST_CHANNEL_CAPACITY": "1", "PAI_LOG_LEVEL": "DEBUG"}
    else:
        env = {"PAI_TEST_REALTIME_REDIS_URL": request.getfixturevalue("redis_url")}
    yield from start_server(
        request, tmp_path_factory, django_db_blocker, f"realtime-{request.param}", **env
    )


def _run_ended(frame: dict[str, Any]) -> bool:
    return frame["type"] == "run.status" and frame["status"] not in ("queued", "running")


def _without_times(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = json.loads(json.dumps(messages))
    for message in out:
        message["metadata"]["pai"].pop("createdAt", None)
        message["metadata"]["pai"].pop("updatedAt", None)
    return out


async def test_every_event_arrives_once_in_order(server: DaphneServer) -> None:
    """Three clients watch one run: each receives a contiguous sequence (gaps refilled)
    and folds to the stored transcript."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        states = [ThreadState() for _ in range(3)]
        async with (
            alice.websocket(thread_id) as a,
            alice.websocket(thread_id) as b,
            alice.websocket(thread_id) as c,
        ):
            sockets = (a, b, c)
            for ws, state in zip(sockets, states, strict=True):
                await recv_until(ws, lambda f: f["type"] == "synced", sink=state.apply)
            await a.send(json.dumps({"type": "send", "text": "many small deltas"}))
            frames = {}
            for ws, state in zip(sockets, states, strict=True):
                frames[id(ws)] = await recv_until(ws, _run_ended, sink=state.apply)
        stored = _without_times(await alice.messages(thread_id))

    for received in frames.values():
        seqs = [f["seq"] for f in received if "seq" in f]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
        chunks = [f for f in received if f["type"] == "generation.message.chunk"]
        assert [f["index"] for f in chunks] == list(range(len(chunks)))
        assert reduce_chunks([f["chunk"] for f in chunks])["parts"] == stored[-1]["parts"]
    for state in states:
        assert state.transcript() == stored


async def test_resume_mid_generation(server: DaphneServer) -> None:
    """MF-028 on this transport: leave mid-generation, resume with ``since``, converge."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        state = ThreadState()
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced", sink=state.apply)
            await ws.send(json.dumps({"type": "send", "text": "long answer please"}))
            await recv_until(
                ws,
                lambda f: f["type"] == "generation.message.chunk" and f["index"] >= 10,
                sink=state.apply,
            )
        async with alice.websocket(thread_id, since=state.seq) as ws:
            frames = await recv_until(ws, _run_ended, sink=state.apply)
        stored = _without_times(await alice.messages(thread_id))

    assert frames[0]["type"] == "resumed"
    assert any(f.get("replay") for f in frames)
    assert state.transcript() == stored


@pytest.fixture
async def publish_to_server(
    request: pytest.FixtureRequest, settings: Any, server: DaphneServer
) -> AsyncIterator[None]:
    """This process publishes into the server's Redis buffer and channel layer."""
    if "redis" not in request.node.callspec.id:
        pytest.skip("needs the buffer and channel layer shared across processes (Redis)")
    async with redis_realtime(settings, request.getfixturevalue("redis_url")):
        yield


async def test_a_stale_status_never_takes_back_a_run_end(
    server: DaphneServer, publish_to_server: None
) -> None:
    """A cancel (or an answer) reads the run and publishes after its commit; the run may end
    in between and the stale read be numbered after the end (the e2e cancel flake of issue
    16). No client is told the ended run runs again: live, on a resume that replays both,
    or after a snapshot."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        async with alice.websocket(thread_id) as ws:
            before = await recv_until(ws, lambda f: f["type"] == "synced")
            await ws.send(json.dumps({"type": "send", "text": "hello"}))
            end = (await recv_until(ws, _run_ended))[-1]
            run_id = end["runId"]
            stale = {**end, "status": "running", "run": {**end["run"], "status": "running"}}
            stale.pop("seq")
            marker = queue_changed(thread_id, {"items": []})
            numbered = await delivery.publish(thread_id, [stale, marker])
            assert [e["type"] for e in numbered] == ["run.status", "queue.changed"]
            live = await recv_until(ws, lambda f: f.get("seq") == numbered[-1]["seq"])
        async with alice.websocket(thread_id, since=before[-1]["seq"]) as ws:
            resumed = await recv_until(ws, lambda f: f["type"] == "synced")
        async with alice.websocket(thread_id) as ws:
            fresh = await recv_until(ws, lambda f: f["type"] == "synced")

    def statuses(frames: list[dict[str, Any]]) -> list[str]:
        return [f["status"] for f in frames if f["type"] == "run.status" and f["runId"] == run_id]

    assert statuses(live) == []
    assert resumed[0]["type"] == "resumed"
    assert statuses(resumed)[-1] == end["status"]
    assert statuses(resumed).count(end["status"]) == 1
    assert [r["status"] for r in fresh[0]["state"]["runs"] if r["id"] == run_id] == [end["status"]]
    assert statuses(fresh) == []
