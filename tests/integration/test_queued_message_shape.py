"""MF-035 over the real surfaces: a queued message carries the complete projected
user-message shape, ``metadata.pai.createdAt``/``updatedAt`` included (message-format.md),
in the HTTP send response, the thread head, the websocket snapshot, ``queue.changed`` and
the websocket send reply, against a real daphne server."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from tests.support.realtime import recv_until, server_fixture
from tests.support.server import Browser, DaphneServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

server = server_fixture("queued-message-shape")


def _pai(item: dict[str, Any]) -> dict[str, Any]:
    (message,) = item["messages"]
    assert set(message) == {"id", "role", "metadata", "parts"}
    assert message["role"] == "user"
    return dict(message["metadata"]["pai"])


def _assert_times(pai: dict[str, Any]) -> None:
    assert pai["producer"] == "send" and pai["status"] == "pending"
    for key in ("createdAt", "updatedAt"):
        assert isinstance(pai[key], str) and pai[key].endswith("Z")
        datetime.fromisoformat(pai[key])
    assert pai["updatedAt"] == pai["createdAt"]  # not edited before admission


async def test_mf_035_queued_messages_carry_created_and_updated_at(server: DaphneServer) -> None:
    """MF-035: every surface shows a queued message with createdAt/updatedAt, the same
    values everywhere."""
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow")
        first = await alice.send(thread_id, "a long first message")
        queued = await alice.send(thread_id, "second")
        item = queued["queued"]
        assert item is not None, queued
        sent_pai = _pai(item)
        _assert_times(sent_pai)

        head = (await alice.api("GET", f"/threads/{thread_id}/state")).json()
        (head_item,) = [i for i in head["queue"] if i["id"] == item["id"]]
        assert _pai(head_item) == sent_pai

        async with alice.websocket(thread_id) as ws:
            frames = await recv_until(ws, lambda f: f["type"] == "synced")
            (snapshot,) = [f for f in frames if f["type"] == "snapshot"]
            (ws_item,) = [i for i in snapshot["state"]["queue"]["items"] if i["id"] == item["id"]]
            assert _pai(ws_item) == sent_pai

            await ws.send(json.dumps({"type": "send", "text": "third", "requestId": "r3"}))
            seen: list[dict[str, Any]] = []

            def both(frame: dict[str, Any]) -> bool:
                seen.append(frame)
                return any(f["type"] == "ack" and f.get("requestId") == "r3" for f in seen) and any(
                    f["type"] == "queue.changed" and len(f["queue"]["items"]) == 2 for f in seen
                )

            await recv_until(ws, both)
            (ack,) = [f for f in seen if f["type"] == "ack"]
            _assert_times(_pai(ack["queued"]))
            changed = [f for f in seen if f["type"] == "queue.changed"][-1]
            older, third = changed["queue"]["items"]
            assert _pai(older) == sent_pai
            assert _pai(third) == _pai(ack["queued"])
        await alice.wait_run(first["run"]["id"])
