"""The attempt history of a crashed run (issue 12, point 1): a real Celery worker is SIGKILLed
mid-stream, the sweeper records its lease lost and re-dispatches, the other worker's attempt
completes the run, and the run page tells that story.

Real worker processes (tests.support.durable_settings: 3 s leases) on the PostgreSQL test
database and the test Redis, as in tests/integration/test_durable_recovery.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from pai_threads import services
from pai_threads.execution.recovery import recover_runs
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, RunAttempt, Step
from tests.support import durable_harness as harness
from tests.support.workers import CeleryWorker

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

IDENTITY = Identity(scope_key="test:attempts", data={"userId": "attempts"})


@pytest.fixture
def workers(transactional_db: None, redis_url: str, tmp_path: Path) -> Iterator[list[CeleryWorker]]:
    """Two idle workers; this process dispatches to them."""
    with harness.celery_dispatch(redis_url):
        fleet = harness.start_workers(2, redis_url=redis_url, log_dir=tmp_path)
        yield fleet
        harness.stop_workers(fleet)


def _claimed_by(run_id: str, fleet: list[CeleryWorker]) -> tuple[CeleryWorker, RunAttempt]:
    """The worker whose attempt holds the run (a worker is host:pid:thread)."""

    def probe() -> tuple[CeleryWorker, RunAttempt] | None:
        attempt = RunAttempt.objects.filter(run_id=run_id, ended="").first()
        if attempt is None:
            return None
        pid = int(attempt.worker.split(":")[1])
        worker = next((w for w in fleet if w.pid == pid), None)
        return (worker, attempt) if worker else None

    return harness.wait_until(probe, timeout=20, what=f"a worker to claim {run_id}", workers=fleet)


def test_a_killed_workers_attempt_is_recorded_lost_and_the_recovery_completes(
    workers: list[CeleryWorker],
) -> None:
    thread = services.create_thread(IDENTITY, agent="durable")
    sent = services.send(IDENTITY, thread.id, {"parts": [{"type": "text", "text": "stream 4"}]})
    assert sent.run is not None
    run_id = sent.run.id
    victim, first = _claimed_by(run_id, workers)
    harness.wait_until(
        lambda: Message.objects.filter(run_id=run_id, status=Message.Status.OPEN).first(),
        timeout=10,
        what="a checkpoint of the streaming message",
        workers=workers,
    )
    victim.kill()
    harness.wait_until(
        lambda: Run.objects.filter(
            pk=run_id, status=Run.Status.RUNNING, lease_expires_at__lt=timezone.now()
        ).first(),
        timeout=15,
        what="the dead worker's lease to expire",
        workers=workers,
    )
    assert run_id in recover_runs()
    run = harness.wait_terminal(run_id, timeout=30, workers=workers)
    assert run.status == Run.Status.COMPLETED, f"{run.status} {run.error}\n{harness.logs(workers)}"

    lost, recovered = RunAttempt.objects.filter(run_id=run_id).order_by("number")
    assert (lost.number, lost.lease_token, lost.worker) == (1, 1, first.worker)
    assert lost.ended == RunAttempt.End.LEASE_LOST and "sweeper" in lost.reason
    (survivor,) = [w for w in workers if w is not victim]
    assert int(recovered.worker.split(":")[1]) == survivor.pid
    assert (recovered.number, recovered.lease_token, recovered.ended) == (2, 2, "completed")
    assert lost.ended_at is not None and lost.ended_at <= recovered.claimed_at
    # The dead attempt committed no step; the recovery committed the answer.
    assert list(Step.objects.filter(run_id=run_id).values_list("attempt", flat=True)) == [2]

    User.objects.create_superuser("op", "op@example.com", "pw")
    client = Client()
    client.login(username="op", password="pw")
    page = client.get(reverse("admin:pai_threads_run_change", args=[quote(run_id)]))
    html = page.content.decode()
    assert "recovered: took over from attempt 1" in html
    assert first.worker in html and recovered.worker in html
    assert "no step committed by this attempt" in html
