"""The browser client (``static/pai/client.js``, under Node) never takes back a run's end.

The server withholds a stale ``run.status`` on a connection that saw the run end
(``FoldGuard``); a client that saw the end and resumed on a new connection may still get
one, and keeps the end (the e2e cancel flake of issue 16: a badge left on "running").
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import REPO_ROOT

NODE = shutil.which("node")

SCRIPT = r"""
import { ThreadConnection } from "%(client)s";

class FakeSocket { constructor() { this.readyState = 1; } send() {} close() {} }
globalThis.location = { protocol: "http:", host: "test" };
const conn = new ThreadConnection({ threadId: "t", url: "ws://x/", WebSocketImpl: FakeSocket });
const seen = [];
for (const frame of %(frames)s) {
  conn.receive(frame);
  seen.push(conn.state.runs.map((r) => `${r.id}:${r.status}`).join(","));
}
console.log(JSON.stringify(seen));
"""


def _status(seq: int, run_id: str, status: str) -> dict[str, Any]:
    run = {"id": run_id, "threadId": "t", "status": status}
    return {"type": "run.status", "seq": seq, "runId": run_id, "status": status, "run": run}


def _fold(tmp_path: Path, frames: list[dict[str, Any]]) -> list[str]:
    assert NODE is not None
    script = tmp_path / "runs.mjs"
    client = (REPO_ROOT / "pai_threads/static/pai/client.js").as_uri()
    script.write_text(SCRIPT % {"client": client, "frames": json.dumps(frames)})
    done = subprocess.run(
        [NODE, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run static/pai/client.js")
def test_a_stale_status_after_the_end_keeps_the_end(tmp_path: Path) -> None:
    resumed = {"type": "resumed", "since": 3}
    frames = [
        resumed,
        _status(4, "run_1", "running"),
        _status(5, "run_1", "cancelled"),
        _status(6, "run_1", "running"),  # read before the end, numbered after it
        _status(7, "run_2", "queued"),
        _status(8, "run_2", "running"),
        _status(9, "run_2", "waiting"),  # not an end: a waiting run resumes
        _status(10, "run_2", "running"),
    ]
    assert _fold(tmp_path, frames)[1:] == [
        "run_1:running",
        "run_1:cancelled",
        "run_1:cancelled",
        "run_1:cancelled,run_2:queued",
        "run_1:cancelled,run_2:running",
        "run_1:cancelled,run_2:waiting",
        "run_1:cancelled,run_2:running",
    ]
