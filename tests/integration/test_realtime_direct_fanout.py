"""In-process fan-out writes live batches in the layer's send (issue 16), never out of order.

A subscriber of the in-memory layer may take a live batch right where it is fanned out
(:meth:`InMemoryChannelLayer.attach`); the thread websocket does, on daphne, when it has
nothing in flight. What must hold: a channel with anything queued keeps its later batches
behind it; a declined batch is queued as before; a client that resyncs mid-stream (its
consumer busy with the snapshot) gets the generation replayed and every later event
exactly once, in order, whether written in the fan-out or queued.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pai_threads.realtime.buffers.memory import MemoryReplayBuffer
from pai_threads.realtime.layers import InMemoryChannelLayer
from pai_threads.realtime.notify import MESSAGE_TYPE
from pai_threads.realtime.sync import Cursor
from tests.support.realtime import recv_until, server_fixture
from tests.support.server import Browser, DaphneServer


def _batch(*seqs: int) -> dict[str, Any]:
    return {"type": MESSAGE_TYPE, "events": [{"type": "x", "seq": s} for s in seqs]}


async def _layer_with(channel_count: int) -> tuple[InMemoryChannelLayer, list[str]]:
    layer = InMemoryChannelLayer()
    channels = [await layer.new_channel() for _ in range(channel_count)]
    for channel in channels:
        await layer.group_add("pai.thread.t", channel)
    return layer, channels


async def test_an_attached_receiver_takes_a_batch_instead_of_the_queue() -> None:
    layer, (mine, other) = await _layer_with(2)
    taken: list[dict[str, Any]] = []

    def take(message: dict[str, Any]) -> bool:
        taken.append(message)
        return True

    layer.attach(mine, take)
    layer.group_send_now("pai.thread.t", _batch(1))
    assert [m["events"][0]["seq"] for m in taken] == [1]
    assert mine not in layer.channels  # nothing queued for it
    assert (await layer.receive(other))["events"][0]["seq"] == 1  # the others: queued


async def test_a_declined_batch_is_queued_and_keeps_later_ones_behind_it() -> None:
    layer, (channel,) = await _layer_with(1)
    answers = iter([False, True, True])
    offered: list[int] = []

    def receiver(message: dict[str, Any]) -> bool:
        offered.append(message["events"][0]["seq"])
        return next(answers)

    layer.attach(channel, receiver)
    layer.group_send_now("pai.thread.t", _batch(1))  # declined: queued
    layer.group_send_now("pai.thread.t", _batch(2))  # something queued: not offered
    assert offered == [1]
    assert [(await layer.receive(channel))["events"][0]["seq"] for _ in range(2)] == [1, 2]
    layer.group_send_now("pai.thread.t", _batch(3))  # the queue drained: offered again
    assert offered == [1, 3]
    layer.group_send_now("pai.thread.t", {"type": "other.kind", "n": 4})  # never offered
    layer.detach(channel)
    layer.group_send_now("pai.thread.t", _batch(5))
    assert offered == [1, 3]
    assert (await layer.receive(channel))["n"] == 4
    assert (await layer.receive(channel))["events"][0]["seq"] == 5


async def test_the_cursor_takes_only_the_next_numbers_without_a_read() -> None:
    cursor = Cursor(buffer=MemoryReplayBuffer(), thread_id="t", last=4)
    assert not cursor.admit_next([{"seq": 6}])  # a gap: left for admit()'s refill
    assert not cursor.admit_next([{"seq": 4}])  # a duplicate
    assert not cursor.admit_next([{"seq": 5}, {"seq": 7}])
    assert cursor.last == 4
    assert cursor.admit_next([{"seq": 5}, {"seq": 6}])
    assert cursor.last == 6


server = server_fixture("realtime-direct-fanout")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_resyncs_mid_stream_then_every_event_once_in_order(
    server: DaphneServer,
) -> None:
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            await ws.send(json.dumps({"type": "send", "requestId": "r1", "text": "long one"}))
            await recv_until(ws, lambda f: f["type"] == "generation.started")
            for _ in range(3):  # each while live deltas keep arriving
                await recv_until(ws, lambda f: f["type"] == "generation.message.chunk")
                await ws.send(json.dumps({"type": "sync"}))
                await recv_until(ws, lambda f: f["type"] == "snapshot")
                resync = await recv_until(ws, lambda f: f["type"] == "synced")
                synced = resync[-1]["seq"]
                assert all(f.get("seq", 0) <= synced for f in resync), "live before synced"
            after = await recv_until(
                ws, lambda f: f["type"] == "run.status" and f["status"] == "completed"
            )
            assert (await alice.messages(thread_id))[-1]["role"] == "assistant"
    seqs = [f["seq"] for f in after if "seq" in f]
    assert seqs == list(range(synced + 1, synced + 1 + len(seqs))), "each once, in order"
    # The last resync's replay plus what followed is the whole generation, in order.
    chunks = [f for f in resync + after if f["type"] == "generation.message.chunk"]
    assert [c["index"] for c in chunks] == list(range(len(chunks)))
