"""Acceptance (issue 13): a data-collection suspension answered later, across worker
restarts, completes the tool call exactly once, on real Celery worker processes.

The ``collector`` agent's ``ship`` tool (tests.support.suspension_agents) asks for an address,
then a confirmation, and appends to a file on every entry into ``execute`` and once when it
ships: the file is the execution counter, readable from this process. Each answer is given
while the worker that suspended the call is dead (SIGKILL) and a fresh one picks the run up.
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
from tests.support import suspension_settings
from tests.support.suspension_agents import lines

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

IDENTITY = Identity(scope_key="test:suspensions", data={"userId": "collector"})
ADDRESS = {"street": "1 Main St", "city": "Lyon"}


@pytest.fixture
def fleet(transactional_db: None, redis_url: str, tmp_path: Path) -> Iterator[harness.WorkerFleet]:
    """Workers on this module's settings; this process dispatches to them, serving the same
    agents (answers are validated here)."""
    own_db = redis_url.rsplit("/", 1)[0] + "/11"  # this module's Redis database
    pai = {**settings.PAI, **suspension_settings.PAI, "EXECUTOR": "celery"}
    with harness.celery_dispatch(own_db, pai):
        workers = harness.WorkerFleet(
            own_db,
            tmp_path,
            settings_module="tests.support.suspension_settings",
            name="suspensions",
        )
        try:
            yield workers
        finally:
            workers.stop()


def _waiting_on(run_id: str, suspension: str, fleet: harness.WorkerFleet) -> PendingAction:
    def probe() -> PendingAction | None:
        if not Run.objects.filter(pk=run_id, status=Run.Status.WAITING).exists():
            return None
        return PendingAction.objects.filter(
            run_id=run_id, status="pending", request__suspension=suspension
        ).first()

    return harness.wait_until(
        probe, timeout=30, what=f"{run_id} to wait on {suspension!r}", workers=fleet.workers
    )


def test_an_answer_given_across_worker_restarts_completes_the_call_exactly_once(
    fleet: harness.WorkerFleet, tmp_path: Path
) -> None:
    counter = tmp_path / "ship.log"
    first = fleet.start()
    thread = services.create_thread(IDENTITY, agent="collector")
    sent = services.send(
        IDENTITY, thread.id, {"parts": [{"type": "text", "text": f"ship o-7 {counter}"}]}
    )
    assert sent.run is not None
    run_id = sent.run.id
    address = _waiting_on(run_id, "address", fleet)
    assert lines(counter) == ["enter"]

    first.kill()  # the worker that suspended the call is gone
    fleet.start()
    services.submit_action(IDENTITY, address.id, {"answer": ADDRESS})
    confirm = _waiting_on(run_id, "confirm", fleet)
    assert confirm.sequence == 1 and confirm.input == {"to": "1 Main St, Lyon"}
    assert lines(counter) == ["enter", "enter"]

    fleet.workers[-1].kill()
    fleet.start()
    services.submit_action(IDENTITY, confirm.id, {"answer": {"ok": True}})
    run = harness.wait_terminal(run_id, timeout=30, workers=fleet.workers)
    assert run.status == Run.Status.COMPLETED, f"{run.status}: {run.error}"

    assert lines(counter) == ["enter", "enter", "enter", "shipped"]  # shipped exactly once
    step = Message.objects.get(run_id=run_id, step_index=0)
    [part] = [p for p in step.parts if p["type"] == "tool-ship"]
    assert part["state"] == "output-available"
    assert part["output"] == {"shipped": "o-7", "to": "Lyon"}
    episodes = PendingAction.objects.filter(run_id=run_id).order_by("sequence")
    assert [(e.request["suspension"], e.status) for e in episodes] == [
        ("address", "executing"),
        ("confirm", "executing"),
    ]
    final = Message.objects.filter(run_id=run_id).order_by("-id").first()
    assert final is not None and "Lyon" in harness.text_of(final.parts)
    harness.assert_transcript_integrity(thread.id)


def test_a_worker_killed_in_the_resumed_execute_is_not_run_again(
    fleet: harness.WorkerFleet, tmp_path: Path
) -> None:
    """At most once: the worker dies while the answered call ships; recovery ends the call
    with the model-visible recovery error and never re-enters ``execute``."""
    counter = tmp_path / "ship.log"
    worker = fleet.start()
    thread = services.create_thread(IDENTITY, agent="collector")
    sent = services.send(
        IDENTITY, thread.id, {"parts": [{"type": "text", "text": f"ship slow-1 {counter}"}]}
    )
    assert sent.run is not None
    run_id = sent.run.id
    services.submit_action(IDENTITY, _waiting_on(run_id, "address", fleet).id, {"answer": ADDRESS})
    confirm = _waiting_on(run_id, "confirm", fleet)
    services.submit_action(IDENTITY, confirm.id, {"answer": {"ok": True}})
    harness.wait_until(
        lambda: "shipping" in lines(counter),
        timeout=30,
        what="the resumed execute to start shipping",
        workers=fleet.workers,
    )
    worker.kill()
    fleet.start()
    harness.wait_until(
        lambda: Run.objects.filter(
            pk=run_id, status=Run.Status.RUNNING, lease_expires_at__lt=timezone.now()
        ).first(),
        timeout=15,
        what="the dead worker's lease to expire",
        workers=fleet.workers,
    )
    assert run_id in recover_runs()
    run = harness.wait_terminal(run_id, timeout=30, workers=fleet.workers)
    assert run.status == Run.Status.COMPLETED, f"{run.status}: {run.error}"
    assert lines(counter) == ["enter", "enter", "enter", "shipping"]  # not re-entered
    step = Message.objects.get(run_id=run_id, step_index=0)
    [part] = [p for p in step.parts if p["type"] == "tool-ship"]
    assert part["state"] == "output-error"
    assert part["toolMetadata"]["pai"]["source"] == "recovery"
    harness.assert_transcript_integrity(thread.id)
