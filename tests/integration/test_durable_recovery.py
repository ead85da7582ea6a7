"""Acceptance (issue 4): runs survive real worker crashes and pauses.

Real ``celery worker`` processes (tests.support.durable_settings: 3 s leases) on the PostgreSQL
test database and the test Redis. A worker is SIGKILLed or SIGSTOPped mid-run; the sweeper
(``recover_runs()`` or ``manage.py pai_recover``) re-dispatches the run once its lease expired
and the other worker completes it from the last committed step.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from pai_threads import services
from pai_threads.execution.recovery import recover_runs
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Step
from tests.support.durable_agents import stream_text
from tests.support.durable_harness import (
    assert_transcript_integrity,
    celery_dispatch,
    logs,
    start_workers,
    stop_workers,
    text_of,
    tool_parts,
    wait_terminal,
    wait_until,
)
from tests.support.workers import REPO_ROOT, CeleryWorker

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.redis,
    pytest.mark.django_db(transaction=True),
]

IDENTITY = Identity(scope_key="test:durable", data={"userId": "durable"})


@pytest.fixture
def fleet(transactional_db: None, redis_url: str, tmp_path: Path) -> Iterator[list[CeleryWorker]]:
    """Two idle workers (concurrency 1), with this process dispatching to them."""
    with celery_dispatch(redis_url):
        workers = start_workers(2, redis_url=redis_url, log_dir=tmp_path)
        try:
            yield workers
        finally:
            stop_workers(workers)


def _send(text: str) -> tuple[str, str]:
    thread = services.create_thread(IDENTITY, agent="durable")
    result = services.send(IDENTITY, thread.id, {"parts": [{"type": "text", "text": text}]})
    assert result.run is not None
    return thread.id, result.run.id


def _owner(run_id: str, workers: list[CeleryWorker]) -> CeleryWorker:
    """The worker holding the run's lease (lease_owner is host:pid:thread)."""

    def probe() -> CeleryWorker | None:
        run = Run.objects.get(pk=run_id)
        if run.status != Run.Status.RUNNING or not run.lease_owner:
            return None
        pid = int(run.lease_owner.split(":")[1])
        return next((w for w in workers if w.pid == pid), None)

    return wait_until(probe, timeout=20, what=f"a worker to claim {run_id}", workers=workers)


def _wait_lease_expired(run_id: str, workers: list[CeleryWorker]) -> Run:
    def probe() -> Run | None:
        run = Run.objects.get(pk=run_id)
        expired = run.lease_expires_at is not None and run.lease_expires_at < timezone.now()
        return run if run.status == Run.Status.RUNNING and expired else None

    return wait_until(probe, timeout=15, what=f"the lease of {run_id} to expire", workers=workers)


def _snapshot(thread_id: str) -> list[tuple[Any, ...]]:
    return [
        (m.pk, m.message_id, m.status, m.parts, m.updated_at, m.in_transcript)
        for m in Message.objects.filter(thread_id=thread_id).order_by("id")
    ]


def test_sigkill_during_the_model_stream_another_worker_completes(
    fleet: list[CeleryWorker],
) -> None:
    thread_id, run_id = _send("stream 4")
    victim = _owner(run_id, fleet)
    (survivor,) = [w for w in fleet if w is not victim]
    # Kill after the first checkpoint: the dead attempt leaves an open message behind.
    checkpoint = wait_until(
        lambda: Message.objects.filter(run_id=run_id, status=Message.Status.OPEN).first(),
        timeout=10,
        what="a checkpoint of the streaming message",
        workers=fleet,
    )
    victim.kill()
    partial = text_of(Message.objects.get(pk=checkpoint.pk).parts)
    assert partial and partial != stream_text(4)

    _wait_lease_expired(run_id, fleet)
    assert run_id in recover_runs()
    run = wait_terminal(run_id, timeout=30, workers=fleet)
    assert run.status == Run.Status.COMPLETED, f"{run.status} {run.error}\n{logs(fleet)}"
    assert run.attempt == 2 and run.lease_token == 2
    # The other worker executed it (its log line may land just after the commit).
    wait_until(lambda: run_id in survivor.log_text(), timeout=10, what="the log", workers=fleet)

    rows = assert_transcript_integrity(thread_id)
    assert [(m.role, m.step_index) for m in rows] == [("user", None), ("assistant", 0)]
    answer = rows[1]
    # The step was repeated under the open message's id: replaced, not duplicated.
    assert answer.message_id == checkpoint.message_id and answer.pk == checkpoint.pk
    assert text_of(answer.parts) == stream_text(4)
    assert Step.objects.filter(run_id=run_id).count() == 1


def test_sigkill_during_a_tool_call_settles_it_as_a_recovery_error(
    fleet: list[CeleryWorker], tmp_path: Path
) -> None:
    effects = tmp_path / "side-effects.log"
    thread_id, run_id = _send(f"tool 5 {effects}")
    victim = _owner(run_id, fleet)
    wait_until(
        lambda: effects.exists() and "start" in effects.read_text(),
        timeout=15,
        what="the tool to start",
        workers=fleet,
    )
    victim.kill()
    _wait_lease_expired(run_id, fleet)

    # The sweeper as operators run it: the management command, in its own process.
    swept = subprocess.run(
        [sys.executable, "manage.py", "pai_recover"],
        cwd=REPO_ROOT,
        env=fleet[0].env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert swept.returncode == 0, swept.stderr
    assert "re-dispatched 1 run(s)" in swept.stdout and run_id in swept.stdout, swept.stdout
    run = wait_terminal(run_id, timeout=30, workers=fleet)
    assert run.status == Run.Status.COMPLETED, f"{run.status} {run.error}\n{logs(fleet)}"

    # At most once: the interrupted call was not executed again.
    assert effects.read_text().splitlines() == [f"start {victim.pid}"]
    rows = assert_transcript_integrity(thread_id)
    assert [(m.role, m.step_index) for m in rows] == [
        ("user", None),
        ("assistant", 0),
        ("assistant", 1),
    ]
    (call,) = tool_parts(rows[1].parts)
    assert call["state"] == "output-error", call
    assert call["toolMetadata"]["pai"]["source"] == "recovery"
    # The run continued: the model was told the call did not complete.
    assert "was not completed" in text_of(rows[2].parts)


def test_sigstop_past_the_lease_the_paused_worker_writes_nothing(
    fleet: list[CeleryWorker],
) -> None:
    thread_id, run_id = _send("stream 5")
    victim = _owner(run_id, fleet)
    (survivor,) = [w for w in fleet if w is not victim]
    wait_until(
        lambda: Message.objects.filter(run_id=run_id, status=Message.Status.OPEN).exists(),
        timeout=10,
        what="a checkpoint of the streaming message",
        workers=fleet,
    )
    victim.pause()
    try:
        _wait_lease_expired(run_id, fleet)
        assert run_id in recover_runs()
        run = wait_terminal(run_id, timeout=30, workers=fleet)
        assert run.status == Run.Status.COMPLETED, f"{run.status} {run.error}\n{logs(fleet)}"
        # The other worker executed it (its log line may land just after the commit).
        wait_until(lambda: run_id in survivor.log_text(), timeout=10, what="the log", workers=fleet)
        before = _snapshot(thread_id)
        run_before = Run.objects.filter(pk=run_id).values().get()
    finally:
        victim.resume()

    # The resumed worker notices at its first write (heartbeat, checkpoint or commit).
    wait_until(
        lambda: "lease lost" in victim.log_text(),
        timeout=15,
        what="the resumed worker to report its lost lease",
        workers=fleet,
    )
    time.sleep(1.0)  # anything it would still try to write, it has tried by now
    assert _snapshot(thread_id) == before
    assert Run.objects.filter(pk=run_id).values().get() == run_before
    victim_log = victim.log_text()
    assert f"run {run_id} failed" not in victim_log, victim_log[-4000:]
    rows = assert_transcript_integrity(thread_id)
    assert [(m.role, m.step_index) for m in rows] == [("user", None), ("assistant", 0)]
    assert text_of(rows[1].parts) == stream_text(5)
    assert Step.objects.filter(run_id=run_id).count() == 1
