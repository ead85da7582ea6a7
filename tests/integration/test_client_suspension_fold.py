"""The browser client (``static/pai/client.js``, under Node) folds the ``data-pai-suspension``
chunks the websocket sends once a waiting step is stored: the live message's tool part gets
``suspensions``/``pendingSuspension`` as the stored message has them, and the raw reserved
part never reaches the client's messages (MF-011, MF-023). The frames come from a real
daphne server."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.realtime import recv_until, server_fixture
from tests.support.server import REPO_ROOT, Browser, DaphneServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

NODE = shutil.which("node")

server = server_fixture("client-suspension-fold")

SCRIPT = r"""
import { ThreadConnection } from "%(client)s";

class FakeSocket { constructor() { this.readyState = 1; } send() {} close() {} }
globalThis.location = { protocol: "http:", host: "test" };
const frames = %(frames)s;
const conn = new ThreadConnection({ threadId: "t", url: "ws://x/", WebSocketImpl: FakeSocket });
const out = { beforeFinished: null };
for (const frame of frames) {
  if (frame.type === "generation.finished" && frame.messageId === "%(message)s") {
    out.beforeFinished = structuredClone(conn.state.messages.find((m) => m.id === "%(message)s"));
  }
  conn.receive(frame);
}
out.after = conn.state.messages.find((m) => m.id === "%(message)s");
console.log(JSON.stringify(out));
"""


async def _frames(server: DaphneServer) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("toolbox")
        async with alice.websocket(thread_id) as ws:
            frames = await recv_until(ws, lambda f: f["type"] == "synced")
            await ws.send(json.dumps({"type": "send", "text": "approval please"}))
            frames += await recv_until(
                ws, lambda f: f["type"] == "run.status" and f["status"] == "waiting"
            )
        return frames, await alice.messages(thread_id)


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run static/pai/client.js")
async def test_mf_023_client_folds_streamed_suspension_records(
    server: DaphneServer, tmp_path: Path
) -> None:
    frames, stored = await _frames(server)
    assistant = stored[-1]
    assert assistant["role"] == "assistant"
    chunks = [
        f["chunk"]["type"]
        for f in frames
        if f["type"] == "generation.message.chunk" and f["messageId"] == assistant["id"]
    ]
    if "data-pai-suspension" not in chunks:
        pytest.skip("this server's websocket sends no data-pai-suspension chunks")
    script = tmp_path / "fold.mjs"
    script.write_text(
        SCRIPT
        % {
            "client": (REPO_ROOT / "pai_threads/static/pai/client.js").as_uri(),
            "frames": json.dumps(frames),
            "message": assistant["id"],
        }
    )
    done = subprocess.run(
        [str(NODE), str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    live = out["beforeFinished"]
    assert live is not None
    assert [p["type"] for p in live["parts"] if p["type"].startswith("data-pai-")] == []
    # Folded from the chunks alone (before generation.finished brings the stored message).
    assert live["parts"] == assistant["parts"]
    (tool,) = [p for p in live["parts"] if p.get("toolCallId")]
    assert tool["pendingSuspension"] is not None and tool["suspensions"]
    assert out["after"]["parts"] == assistant["parts"]
