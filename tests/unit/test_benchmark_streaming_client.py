"""The W4/W5 client's count: each delta once, as a client keeps it through a resync."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.stream_client import ClientStream

MESSAGE = "msg_1"


def _frame(**fields: Any) -> str:
    return json.dumps(fields)  # the server's separators: '"index": 3'


def _started(*, replay: bool = False) -> str:
    extra = {"replay": True} if replay else {}
    return _frame(type="generation.started", messageId=MESSAGE, **extra)


def _chunk(index: int, chunk: dict[str, Any], *, replay: bool = False) -> str:
    extra = {"replay": True} if replay else {"seq": 100 + index}
    fields = {"type": "generation.message.chunk", "messageId": MESSAGE, "index": index}
    return _frame(**fields, chunk=chunk, **extra)


def _delta(index: int, due: int, *, replay: bool = False) -> str:
    chunk = {"type": "text-delta", "id": "t", "delta": f"<{due}|{due + 5}> "}
    return _chunk(index, chunk, replay=replay)


def _snapshot(text: str = "", status: str = "running") -> str:
    state = {
        "messages": [{"id": "m0", "parts": [{"type": "text", "text": text}]}] if text else [],
        "runs": [{"id": "run_1", "status": status}],
    }
    return _frame(type="snapshot", seq=500, state=state)


def _fold(stream: ClientStream, frames: list[str]) -> bool:
    return any([stream.take(raw, 1_000) for raw in frames])


def test_a_live_stream_counts_every_delta_once_in_order() -> None:
    stream = ClientStream(thread_id="thr")
    frames = [_started(), _chunk(0, {"type": "start"})]
    frames += [_delta(i + 1, due=10 * i) for i in range(3)]
    assert not _fold(stream, frames)
    assert stream.take(_frame(type="run.status", status="completed"), 2_000)
    assert sorted(stream.seen) == [0, 10, 20]
    assert (stream.frames, stream.replayed, stream.repeated, stream.disorder) == (3, 0, 0, 0)
    assert stream.delivery == [1_000 - 5, 1_000 - 15, 1_000 - 25]
    assert stream.status == "completed"


def test_a_resync_replays_the_open_message_and_each_delta_counts_once() -> None:
    stream = ClientStream(thread_id="thr")
    frames = [_started(), _chunk(0, {"type": "start"}), _delta(1, 0), _delta(2, 10)]
    # Delta 3 (due 20) is lost; the server resyncs: snapshot, then the replay from index 0.
    frames += [_snapshot(), _started(replay=True), _chunk(0, {"type": "start"}, replay=True)]
    frames += [_delta(i + 1, 10 * i, replay=True) for i in range(3)]
    frames += [_frame(type="synced", seq=500), _delta(4, 30)]
    assert not _fold(stream, frames)
    assert sorted(stream.seen) == [0, 10, 20, 30]
    assert (stream.frames, stream.replayed, stream.repeated) == (6, 3, 2)
    assert (stream.resyncs, stream.disorder) == (1, 0)
    assert len(stream.delivery) == 4  # first arrivals only


def test_a_gap_without_a_resync_is_out_of_order() -> None:
    stream = ClientStream(thread_id="thr")
    _fold(stream, [_started(), _delta(0, 0), _delta(2, 20)])
    assert stream.disorder == 1
    # A resync heals it: only the order since the last one counts.
    _fold(stream, [_snapshot(), _started(replay=True), _delta(0, 0, replay=True)])
    assert stream.disorder == 0


def test_a_run_that_ended_before_the_resync_ends_the_stream_from_the_snapshot() -> None:
    stream = ClientStream(thread_id="thr")
    stream.take(_frame(type="ack", command="send", run={"id": "run_1"}), 500)
    _fold(stream, [_started(), _delta(0, 0)])
    # The stored message carries the deltas the client missed (their chunks are withheld).
    assert stream.take(_snapshot(text="<0|5> <10|15> <20|25> ", status="completed"), 2_000)
    assert stream.status == "completed"
    assert sorted(stream.seen) == [0, 10, 20]
    assert (stream.from_messages, stream.frames) == (2, 1)
