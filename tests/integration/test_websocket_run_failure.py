"""A run that fails before its step's first checkpoint, over the thread websocket.

Nothing of the failed step is stored, yet clients were shown its generation: the realtime
publisher ends it before the run's ``failed`` status (an ``error`` chunk with the run's
public error, a ``finish`` chunk, and ``generation.finished`` with no message), so no
subscriber keeps an open shell, and a reconnecting one replays a generation that ends.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pai_agents.messages.chunks import validate_chunk
from tests.support.realtime import recv_until, server_fixture
from tests.support.server import Browser, DaphneServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

server = server_fixture("websocket-run-failure")

Frame = dict[str, Any]


def _failed(frame: Frame) -> bool:
    return frame["type"] == "run.status" and frame["status"] == "failed"


async def test_mf_025_a_generation_that_fails_unstored_ends_before_the_failed_status(
    server: DaphneServer,
) -> None:
    """MF-025, MF-027: the failed step's generation ends with ``error`` and ``finish``
    chunks (indexed after its own) and a ``generation.finished`` without a message, all
    before ``run.status`` failed; the transcript holds only the input, as the stream says."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("assistant")  # the offline demo agent
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            await ws.send(json.dumps({"type": "send", "text": "simulate a failure"}))
            frames = await recv_until(ws, _failed)
        stored = await alice.messages(thread_id)
        async with alice.websocket(thread_id) as ws:  # afterwards: nothing left open
            snapshot = (await recv_until(ws, lambda f: f["type"] == "synced"))[0]

    started = next(f for f in frames if f["type"] == "generation.started")
    message_id = started["messageId"]
    of_generation = [f for f in frames if f.get("messageId") == message_id]
    chunks = [f for f in of_generation if f["type"] == "generation.message.chunk"]
    assert [c["index"] for c in chunks] == list(range(len(chunks)))
    assert any(c["chunk"]["type"] == "text-delta" for c in chunks), "it streamed first"
    status = frames[-1]
    error = status["run"]["error"]
    assert [c["chunk"] for c in chunks[-2:]] == [
        {"type": "error", "errorText": error["message"]},
        {"type": "finish", "finishReason": "error"},
    ]
    for chunk in chunks:
        validate_chunk(chunk["chunk"])
    assert of_generation[-1] == {
        "type": "generation.finished",
        "runId": started["runId"],
        "threadId": thread_id,
        "messageId": message_id,
        "message": None,
        "seq": of_generation[-1]["seq"],
    }
    seqs = [f["seq"] for f in frames if "seq" in f]
    assert seqs == sorted(seqs) and of_generation[-1]["seq"] < status["seq"]
    assert "simulated provider outage" not in json.dumps(frames), "the detail stays private"

    assert [m["role"] for m in stored] == ["user"]
    assert snapshot["type"] == "snapshot"
    assert snapshot["state"]["messages"] == stored
