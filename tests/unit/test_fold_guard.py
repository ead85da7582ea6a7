"""What the websocket withholds from a client that could not fold it (``FoldGuard``).

A run's end is final. An operation that reads a run and publishes after its commit (a
cancel, an answered action) can read it before the run ends and have that read numbered
after the run's own end: the stale ``running`` would leave every client showing an ended
run running (the e2e cancel flake of issue 16). The guard withholds it, whether the client
saw the end live, replayed, or in its snapshot.
"""

from __future__ import annotations

from typing import Any

import pytest

from pai_threads.realtime.sync import FoldGuard


def _status(run_id: str, status: str) -> dict[str, Any]:
    return {"type": "run.status", "runId": run_id, "status": status, "run": {"id": run_id}}


@pytest.mark.parametrize("end", ["completed", "failed", "cancelled", "blocked"])
@pytest.mark.parametrize("stale", ["queued", "running", "waiting"])
def test_a_run_seen_ended_is_never_taken_back(end: str, stale: str) -> None:
    guard = FoldGuard()
    assert guard.admit(_status("run_1", "running"))
    assert guard.admit(_status("run_1", end))
    assert not guard.admit(_status("run_1", stale))
    assert guard.admit(_status("run_1", end))  # the end itself again: harmless, admitted
    assert guard.admit(_status("run_2", stale))  # another run is its own


def test_a_waiting_run_that_resumes_is_not_an_end() -> None:
    guard = FoldGuard()
    for status in ("running", "waiting", "queued", "running", "completed"):
        assert guard.admit(_status("run_1", status))


def test_an_end_in_the_snapshot_counts_and_survives_resyncs() -> None:
    guard = FoldGuard()
    snapshot = {
        "type": "snapshot",
        "seq": 7,
        "state": {
            "runs": [{"id": "run_1", "status": "cancelled"}, {"id": "run_2", "status": "running"}]
        },
    }
    guard.reset()
    assert guard.admit(snapshot)
    assert not guard.admit(_status("run_1", "running"))
    assert guard.admit(_status("run_2", "running"))
    guard.reset()  # a later resync: the end is still the run's
    assert not guard.admit(_status("run_1", "running"))


def test_chunks_still_need_their_generation_start() -> None:
    guard = FoldGuard()
    chunk = {"type": "generation.message.chunk", "messageId": "m", "index": 0, "chunk": {}}
    assert not guard.admit(chunk)
    assert guard.admit({"type": "generation.started", "messageId": "m"})
    assert guard.admit(chunk)
    guard.reset()
    assert not guard.admit(chunk)
