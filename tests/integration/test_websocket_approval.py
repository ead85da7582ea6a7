"""Answering an approval over the thread websocket, against a real daphne server.

The continuation (the ``generation.started`` with ``continued: true`` that joins the tool
results to the waiting message) restates the answer as a ``tool-approval-response`` chunk,
so a client that folds it onto the message as it streamed (``approval-requested``) rebuilds
exactly the stored one without depending on ``message.committed``; and the answered
message's ``message.committed`` always comes first (it is published before the run is
dispatched).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pai_agents.messages.chunks import validate_chunk
from pai_agents.messages.projection import client_message
from pai_agents.messages.reducer import reduce_chunks
from tests.support.realtime import recv_until, start_server
from tests.support.server import Browser, DaphneServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module", params=["memory", "redis"])
def server(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    django_db_setup: None,
    django_db_blocker: Any,
) -> Iterator[DaphneServer]:
    """In process, and with Redis as channel layer and replay buffer (where publishing an
    operation's events goes through ``async_to_sync``)."""
    env = {}
    if request.param == "redis":
        env = {"PAI_TEST_REALTIME_REDIS_URL": request.getfixturevalue("redis_url")}
    name = f"websocket-approval-{request.param}"
    yield from start_server(request, tmp_path_factory, django_db_blocker, name, **env)


Frame = dict[str, Any]


def _chunks(frames: list[Frame], message_id: str, *, start: int = 0) -> list[Frame]:
    return [
        f["chunk"]
        for f in frames[start:]
        if f["type"] == "generation.message.chunk" and f["messageId"] == message_id
    ]


async def _answer_over_websocket(
    server: DaphneServer, value: dict[str, Any]
) -> tuple[list[Frame], list[Frame], list[Frame]]:
    """Ask for an approval, answer it with ``submit-action``; the frames before and after
    the answer, and the stored transcript."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("toolbox")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            await ws.send(json.dumps({"type": "send", "text": "approval please"}))
            asked = await recv_until(
                ws, lambda f: f["type"] == "actions.changed" and bool(f["pendingActions"])
            )
            (action,) = asked[-1]["pendingActions"]
            await ws.send(
                json.dumps({"type": "submit-action", "actionId": action["id"], "value": value})
            )
            answered = await recv_until(
                ws, lambda f: f["type"] == "run.status" and f["status"] == "completed"
            )
        stored = await alice.messages(thread_id)
    return asked, answered, stored


@pytest.mark.parametrize(
    ("value", "state"),
    [
        ({"approved": True}, "output-available"),
        ({"approved": False, "reason": "not today"}, "output-denied"),
    ],
    ids=["approved", "denied"],
)
async def test_continuation_carries_the_answered_approval(
    server: DaphneServer, value: dict[str, Any], state: str
) -> None:
    """MF-027, MF-028: the continuation's chunks, folded onto the waiting message as it
    streamed, give exactly the stored message (``approval.approved`` included), and the
    answer's ``message.committed`` precedes the continuation."""
    asked, answered, stored = await _answer_over_websocket(server, value)

    first = next(f for f in asked if f["type"] == "generation.started")
    message_id = first["messageId"]
    streamed = reduce_chunks(_chunks(asked, message_id))
    (tool,) = [p for p in streamed["parts"] if p["type"] == "tool-transfer"]
    assert tool["state"] == "approval-requested"
    approval_id = tool["approval"]["id"]

    events = [f for f in answered if "seq" in f]
    kinds = [(f["type"], f.get("messageId") or (f.get("message") or {}).get("id")) for f in events]
    continued = next(
        i for i, f in enumerate(events) if f["type"] == "generation.started" and f.get("continued")
    )
    assert events[continued]["messageId"] == message_id
    committed = kinds.index(("message.committed", message_id))
    assert committed < continued, kinds

    continuation = _chunks(events, message_id, start=continued)
    for chunk in continuation:
        validate_chunk(chunk)
    expected_answer = {"type": "tool-approval-response", "approvalId": approval_id, **value}
    assert continuation[:2] == [{"type": "start", "messageId": message_id}, expected_answer]

    # Through the one projection (suspension records joined onto their tool part).
    final = client_message(reduce_chunks(continuation, streamed))
    (stored_message,) = [m for m in stored if m["id"] == message_id]
    assert final["parts"] == stored_message["parts"]
    (stored_tool,) = [p for p in stored_message["parts"] if p["type"] == "tool-transfer"]
    assert stored_tool["state"] == state
    assert stored_tool["approval"] == {"id": approval_id, **value}
    finished = next(
        f for f in events if f["type"] == "generation.finished" and f["messageId"] == message_id
    )
    assert finished["message"] == stored_message
