"""The per-delta path of realtime delivery (issue 16): leading-edge coalescing, publishing
from synchronous code without an event loop, the in-memory layer's task-free group send,
and the cursor's in-order fast path. Counts and order only: no timed assertions."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from channels.layers import get_channel_layer

from pai_agents.engine.events import RunEvent
from pai_threads.realtime import delivery
from pai_threads.realtime.buffers.memory import MemoryReplayBuffer
from pai_threads.realtime.layers import InMemoryChannelLayer
from pai_threads.realtime.notify import MESSAGE_TYPE
from pai_threads.realtime.publisher import RealtimePublisher
from pai_threads.realtime.subscription import ThreadSubscription
from pai_threads.realtime.sync import Cursor, Resync

HOUR_MS = 3_600_000.0  # a coalescing window no test outlives: only the leading edge fires


def _chunk(index: int, chunk: dict[str, Any]) -> RunEvent:
    return {
        "type": "generation.message.chunk",
        "runId": "run_1",
        "threadId": "thr_hot",
        "messageId": "msg_1",
        "index": index,
        "chunk": chunk,
    }


def _delta(index: int) -> RunEvent:
    return _chunk(index, {"type": "text-delta", "id": "t", "delta": f"d{index} "})


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The chunk indexes of every batch the publisher hands to delivery, in order."""
    seen: list[list[int]] = []

    def record(thread_id: str, events: Sequence[RunEvent]) -> list[RunEvent]:
        seen.append([int(e["index"]) for e in events])
        return list(events)

    monkeypatch.setattr(delivery, "publish_inline", record)
    return seen


async def test_a_lone_delta_goes_out_at_once_and_a_burst_waits_for_its_window(
    batches: list[list[int]],
) -> None:
    """The first delta is delivered when it is published (a paced model's tokens gain no
    latency); deltas within the window after it wait and go out together, in order, with
    the next non-delta chunk."""
    publisher = RealtimePublisher("thr_hot", coalesce_ms=HOUR_MS)
    await publisher.publish(_delta(0))
    await asyncio.sleep(0)  # a flush in a task (out-of-process delivery) runs now
    assert batches == [[0]]
    await publisher.publish(_delta(1))
    await publisher.publish(_delta(2))
    await asyncio.sleep(0)
    assert batches == [[0]], "a burst waits for the window"
    await publisher.publish(_chunk(3, {"type": "text-end", "id": "t"}))
    assert batches == [[0], [1, 2, 3]]
    await publisher.aclose()
    assert batches == [[0], [1, 2, 3]]


async def test_without_coalescing_every_delta_is_its_own_batch(
    batches: list[list[int]],
) -> None:
    publisher = RealtimePublisher("thr_hot", coalesce_ms=0)
    for index in range(3):
        await publisher.publish(_delta(index))
    await publisher.aclose()
    assert batches == [[0], [1], [2]]


@pytest.fixture
def subscriber_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop on another thread, standing in for the server's."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_publish_sync_numbers_and_delivers_in_process_without_an_event_loop(
    subscriber_loop: asyncio.AbstractEventLoop,
) -> None:
    """From synchronous code (an operation after its commit) the events are numbered in
    the memory buffer and reach a subscriber on another loop, in order, exactly once."""
    assert delivery.in_process()
    thread_id = "thr_sync_publish"

    async def subscribe(joined: threading.Event) -> list[RunEvent]:
        async with ThreadSubscription(thread_id) as subscription:
            joined.set()
            received: list[RunEvent] = []
            while len(received) < 3:
                received += await subscription.next_events(5.0)
            return received

    joined = threading.Event()
    future = asyncio.run_coroutine_threadsafe(subscribe(joined), subscriber_loop)
    assert joined.wait(10)
    delivery.publish_sync(thread_id, [_delta(0), _delta(1)])
    delivery.publish_sync(thread_id, [_delta(2)])
    received = future.result(10)
    assert [e["index"] for e in received] == [0, 1, 2]
    seqs = [int(e["seq"]) for e in received]
    assert seqs == list(range(seqs[0], seqs[0] + 3))


async def test_group_send_skips_a_full_channel_and_copies_other_messages() -> None:
    """A full member misses the message (it refills by number later) while the others get
    it; realtime batches share their events, any other message is copied per receiver."""
    layer = InMemoryChannelLayer(capacity=1)
    full, free = await layer.new_channel(), await layer.new_channel()
    for channel in (full, free):
        await layer.group_add("pai.thread.thr_layer", channel)
    await layer.send(full, {"type": "other", "n": 0})
    batch = {"type": MESSAGE_TYPE, "events": [_delta(0)]}
    await layer.group_send("pai.thread.thr_layer", batch)
    assert (await layer.receive(full)) == {"type": "other", "n": 0}
    got = await layer.receive(free)
    assert got == batch and got is not batch and got["events"] is batch["events"]
    nested = {"type": "other", "data": {"k": [1]}}
    await layer.group_send("pai.thread.thr_layer", nested)
    copies = [await layer.receive(full), await layer.receive(free)]
    assert copies == [nested, nested]
    assert all(c["data"] is not nested["data"] for c in copies)


def test_the_test_settings_use_the_task_free_layer() -> None:
    assert isinstance(get_channel_layer(), InMemoryChannelLayer)


async def test_the_cursor_admits_the_next_numbers_and_still_refills_a_gap() -> None:
    buffer = MemoryReplayBuffer()
    numbered = await buffer.append("thr_cursor", [_delta(i) for i in range(5)])
    first = int(numbered[0]["seq"])
    cursor = Cursor(buffer=buffer, thread_id="thr_cursor", last=first - 1)
    assert await cursor.admit(numbered[:2]) == numbered[:2]
    assert await cursor.admit(numbered[1:2]) == []  # a duplicate
    assert await cursor.admit(numbered[4:]) == numbered[2:]  # 2 and 3 refilled, in order
    assert cursor.last == first + 4
    behind = Cursor(buffer=MemoryReplayBuffer(), thread_id="thr_cursor", last=first - 1)
    with pytest.raises(Resync):
        await behind.admit(numbered[3:])
