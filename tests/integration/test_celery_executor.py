"""Acceptance: a send to the demo agent runs on a REAL Celery worker process over Redis.

The worker is a separate ``celery worker`` process reading the test Redis and writing the
same PostgreSQL test database this process uses; the test only sends and then polls rows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings

from pai_project.celery import app as celery_app
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Step
from tests.support.workers import (
    CeleryWorker,
    celery_broker,
    database_url_from_settings,
    worker_env,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.redis]

RUN_TIMEOUT = 60.0
TERMINAL = {"completed", "failed", "cancelled", "blocked"}


@pytest.fixture
def celery_worker(transactional_db: None, redis_url: str, tmp_path: Path) -> Iterator[CeleryWorker]:
    """A real worker on the test database and Redis, with this process sending to it."""
    env = worker_env(
        database_url=database_url_from_settings(connection.settings_dict), redis_url=redis_url
    )
    worker = CeleryWorker(env=env, log_path=tmp_path / "celery-worker.log")
    pai = {**settings.PAI, "EXECUTOR": "celery"}
    try:
        with override_settings(PAI=pai), celery_broker(celery_app, redis_url):
            worker.start()
            worker.wait_ready(timeout=60)
            yield worker
    finally:
        worker.stop()
        worker.save_log(os.environ.get("PAI_ARTIFACTS_DIR"))


def _wait_terminal(run_id: str, worker: CeleryWorker) -> Run:
    deadline = time.monotonic() + RUN_TIMEOUT
    while time.monotonic() < deadline:
        run = Run.objects.get(pk=run_id)
        if run.status in TERMINAL:
            return run
        assert worker.is_alive(), f"the worker died\n{worker.log_text()[-8000:]}"
        time.sleep(0.1)
    run = Run.objects.get(pk=run_id)
    raise AssertionError(
        f"run {run_id} still {run.status} after {RUN_TIMEOUT:.0f}s\n{worker.log_text()[-8000:]}"
    )


def test_send_executes_on_a_real_celery_worker(celery_worker: CeleryWorker) -> None:
    identity = Identity(scope_key="test:celery", data={"userId": "celery-test"})
    thread = services.create_thread(identity, agent="assistant")

    result = services.send(
        identity,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": "What is 12 * (3 + 4)?"}]},
    )
    assert result.created
    assert result.run.status == Run.Status.QUEUED

    run = _wait_terminal(result.run.id, celery_worker)
    log = celery_worker.log_text()
    assert run.status == Run.Status.COMPLETED, f"run ended {run.status}: {run.error}\n{log[-8000:]}"
    assert run.error is None
    assert run.step_count == 2
    assert run.finished_at is not None
    assert run.lease_owner == ""
    # The worker process (not this one) executed it: the task is in the worker's log. The
    # "run ... ended" line is logged just after the final commit, so allow it a moment.
    deadline = time.monotonic() + 10
    while result.run.id not in log and time.monotonic() < deadline:
        time.sleep(0.1)
        log = celery_worker.log_text()
    assert "pai_threads.execute_run" in log
    assert result.run.id in log

    messages = list(Message.objects.filter(thread=thread).order_by("id"))
    assert [(m.role, m.relation, m.step_index) for m in messages] == [
        ("user", "input", None),
        ("assistant", "output", 0),
        ("assistant", "output", 1),
    ]
    user, step1, step2 = messages
    assert all(m.run_id == run.id and m.status == Message.Status.COMMITTED for m in messages)
    assert user.message_id == result.message.message_id
    assert user.parts == [{"type": "text", "text": "What is 12 * (3 + 4)?"}]

    tool_parts = [p for p in step1.parts if p["type"].startswith("tool-")]
    assert len(tool_parts) == 1, step1.parts
    (call,) = tool_parts
    assert call["type"] == "tool-calculator"
    assert call["state"] == "output-available"
    assert call["input"] == {"expression": "12 * (3 + 4)"}
    assert call["output"] == {"expression": "12 * (3 + 4)", "result": 84}
    assert not any(p["type"] == "text" for p in step1.parts)

    texts = [p["text"] for p in step2.parts if p["type"] == "text"]
    assert texts, step2.parts
    assert "84" in "".join(texts)
    assert not any(p["type"].startswith("tool-") for p in step2.parts)

    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert [s.index for s in steps] == [0, 1]
    assert [s.message_id for s in steps] == [step1.pk, step2.pk]
    assert [s.finish_reason for s in steps] == ["tool-calls", "stop"]
    for step in steps:
        assert step.usage["inputTokens"] > 0, step.usage
        assert step.usage["outputTokens"] > 0, step.usage
        assert step.started_at <= step.finished_at
    assert run.usage["inputTokens"] == sum(s.usage["inputTokens"] for s in steps)
    assert run.usage["outputTokens"] == sum(s.usage["outputTokens"] for s in steps)
