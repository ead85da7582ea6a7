"""Acceptance (issue 13): a sub-agent call survives a SIGKILL of the worker mid-call with
the guarantees of a local tool, on real Celery worker processes.

The ``planner`` delegates to the ``searcher`` (tests.support.subagent_agents), whose ``dig``
tool appends to a file when it starts and when it is done; a ``slow`` topic sleeps in
between. The worker is killed while the child's tool runs: the child recovers as any run
does (its interrupted call becomes the recovery error, never run twice), its end answers
the parent's call exactly once, and the parent completes with the child's text.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from pai_threads import services
from pai_threads.execution.recovery import recover_runs
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Run
from tests.support import durable_harness as harness
from tests.support import subagent_settings

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

IDENTITY = Identity(scope_key="test:subagents", data={})


@pytest.fixture
def fleet(transactional_db: None, redis_url: str, tmp_path: Path) -> Iterator[harness.WorkerFleet]:
    """Workers on this module's settings; this process dispatches to them, serving the same
    agents (answers are validated here)."""
    own_db = redis_url.rsplit("/", 1)[0] + "/12"  # this module's Redis database
    pai = {**settings.PAI, **subagent_settings.PAI, "EXECUTOR": "celery"}
    with harness.celery_dispatch(own_db, pai):
        workers = harness.WorkerFleet(
            own_db, tmp_path, settings_module="tests.support.subagent_settings", name="subagents"
        )
        try:
            yield workers
        finally:
            workers.stop()


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_a_subagent_call_survives_a_worker_killed_mid_child(
    fleet: harness.WorkerFleet, tmp_path: Path
) -> None:
    log = tmp_path / "dig.log"
    worker = fleet.start()
    thread = services.create_thread(IDENTITY, agent="planner")
    sent = services.send(
        IDENTITY, thread.id, {"parts": [{"type": "text", "text": f"delegate slow-maps {log}"}]}
    )
    assert sent.run is not None
    parent_id = sent.run.id
    harness.wait_until(
        lambda: "dig slow-maps" in _lines(log),
        timeout=30,
        what="the child's tool to start",
        workers=fleet.workers,
    )
    child = Run.objects.get(parent_run_id=parent_id)
    assert Run.objects.get(pk=parent_id).status == Run.Status.WAITING  # holds no lease
    worker.kill()  # mid-call of the child's tool
    fleet.start()
    harness.wait_until(
        lambda: Run.objects.filter(
            pk=child.id, status=Run.Status.RUNNING, lease_expires_at__lt=timezone.now()
        ).first(),
        timeout=15,
        what="the dead worker's lease to expire",
        workers=fleet.workers,
    )
    assert child.id in recover_runs()
    parent = harness.wait_terminal(parent_id, timeout=60, workers=fleet.workers)
    assert parent.status == Run.Status.COMPLETED, f"{parent.status}: {parent.error}"
    child.refresh_from_db()
    assert child.status == Run.Status.COMPLETED, f"{child.status}: {child.error}"
    assert child.attempt == 2
    assert _lines(log) == ["dig slow-maps"]  # at most once: never re-entered

    # The child's interrupted call is the recovery error its model saw.
    [step] = Message.objects.filter(run=child, step_index=0)
    [dig] = [p for p in step.parts if p["type"] == "tool-dig"]
    assert dig["state"] == "output-error"
    assert dig["toolMetadata"]["pai"]["source"] == "recovery"
    # The parent's call was answered once, by the child's end, and resumed once.
    [action] = PendingAction.objects.filter(run_id=parent_id)
    assert action.kind == "subagent" and action.status == "executing"
    assert action.submitted_by == {"runtime": "subagent", "runId": child.id}
    [call] = [
        p
        for row in Message.objects.filter(run_id=parent_id, role="assistant")
        for p in row.parts
        if p["type"] == "tool-searcher"
    ]
    assert call["state"] == "output-available"
    assert call["output"]["runId"] == child.id and call["output"]["text"].startswith("Found:")
    assert Run.objects.filter(parent_run_id=parent_id).count() == 1
    harness.assert_transcript_integrity(thread.id)
    harness.assert_transcript_integrity(child.thread_id)
