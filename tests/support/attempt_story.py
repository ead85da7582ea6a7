"""A recovered run with tool calls and an approval, made in a server's own database.

Run as ``python -m tests.support.attempt_story`` with the server's environment
(tests.support.settings, its DATABASE_URL, the thread executor): a first worker claims the
toolbox agent's "approval please" run and never writes again (its lease is made to have
expired, as a killed worker's would); the sweeper (``recover_runs``) records the lease lost
and re-dispatches; the recovery asks for the approval and waits; an operator approves and
the resumed attempt executes the call and answers. Prints ``{"run": ..., "user": ...}``:
the run and an operator login for the console.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

import django


def _wait_status(run_id: str, status: str) -> None:
    from pai_threads.models import Run

    deadline = time.monotonic() + 30
    while Run.objects.get(id=run_id).status != status:
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} never became {status}")
        time.sleep(0.05)


def main() -> None:
    django.setup()
    from django.contrib.auth.models import User
    from django.utils import timezone

    from pai_threads import services
    from pai_threads.execution.recovery import recover_runs
    from pai_threads.identity import Identity
    from pai_threads.models import PendingAction, Run
    from pai_threads.store.thread_store import ORMThreadStore

    identity = Identity(scope_key="user:operator-story")
    thread = services.create_thread(identity, agent="toolbox", title="Recovered transfer")
    text = {"parts": [{"type": "text", "text": "approval please: transfer 42"}]}
    run = services.send(identity, thread.id, text, dispatch=False).run
    assert run is not None
    ORMThreadStore().claim_run_sync(run.id, owner="worker-a:4242:crashed", lease_seconds=30)
    Run.objects.filter(id=run.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert run.id in recover_runs()
    _wait_status(run.id, Run.Status.WAITING)
    action = PendingAction.objects.get(run_id=run.id)
    services.submit_action(identity, action.id, {"approved": True, "reason": "checked"})
    _wait_status(run.id, Run.Status.COMPLETED)
    User.objects.create_superuser("story-operator", "op@example.com", "story-pw")
    print(json.dumps({"run": run.id, "user": ["story-operator", "story-pw"]}))


if __name__ == "__main__":
    main()
