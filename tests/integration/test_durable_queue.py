"""Acceptance (issue 4): one active run per thread under concurrent input; send policies.

These run on the in-process thread executor against PostgreSQL (the admission logic is the
same for every executor, and it is the database that must hold the invariants).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import close_old_connections, connection
from django.test import Client, override_settings

from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, QueueItem, Run
from tests.support.durable_harness import (
    assert_transcript_integrity,
    durable_pai,
    text_of,
    wait_terminal,
    wait_until,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

IDENTITY = Identity(scope_key="test:queue", data={"userId": "queue"})
API = "/api/pai"


@pytest.fixture(autouse=True)
def thread_executor(transactional_db: None) -> Iterator[None]:
    with override_settings(PAI=durable_pai("thread")):
        yield


def _text(text: str, message_id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"parts": [{"type": "text", "text": text}]}
    if message_id:
        message["id"] = message_id
    return message


def _idle(thread_id: str) -> bool:
    return not (
        Run.objects.active().filter(thread_id=thread_id).exists()
        or QueueItem.objects.filter(thread_id=thread_id, status=QueueItem.Status.QUEUED).exists()
    )


def test_200_concurrent_sends_one_active_run_each_admitted_once_in_order() -> None:
    thread = services.create_thread(IDENTITY, agent="durable")
    count = 200
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []
    stop = threading.Event()
    samples: list[int] = []

    def send(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = services.send(
                IDENTITY, thread.id, _text(f"hello {index}", f"m{index:03d}")
            )
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    def sample() -> None:
        try:
            while not stop.is_set():
                samples.append(Run.objects.active().filter(thread_id=thread.id).count())
                time.sleep(0.002)
        finally:
            connection.close()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    senders = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(count)]
    started = time.monotonic()
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(timeout=60)
    assert not errors, errors[:3]
    assert all(r is not None and r.created for r in results)
    wait_until(lambda: _idle(thread.id), timeout=60, what="every queued message to be answered")
    stop.set()
    sampler.join(timeout=10)
    close_old_connections()
    elapsed = time.monotonic() - started

    # Never more than one active run (the partial unique index held throughout).
    assert samples and max(samples) <= 1, max(samples)
    runs = list(Run.objects.filter(thread_id=thread.id).order_by("created_at"))
    assert len(runs) == count, len(runs)
    assert {r.status for r in runs} == {"completed"}, {r.status for r in runs}

    # Every message admitted exactly once, in order of acceptance.
    items = {i.message_id: i for i in QueueItem.objects.filter(thread_id=thread.id)}
    assert {i.status for i in items.values()} <= {"admitted"}
    users = list(Message.objects.filter(thread_id=thread.id, role="user").order_by("id"))
    assert sorted(m.message_id for m in users) == [f"m{i:03d}" for i in range(count)]

    def accepted_at(message: Message) -> Any:
        item = items.get(message.message_id)
        return (item.created_at if item else message.created_at, message.id)

    assert [m.message_id for m in users] == [
        m.message_id for m in sorted(users, key=accepted_at)
    ], "the transcript order differs from the order of acceptance"
    for item in items.values():
        assert item.run_id is not None and item.admitted_at is not None
    assert len({m.run_id for m in users}) == count  # one run per message

    # Each answer follows its question.
    rows = assert_transcript_integrity(thread.id)
    assert [m.role for m in rows] == ["user", "assistant"] * count
    for question, answer in zip(rows[::2], rows[1::2], strict=True):
        assert answer.run_id == question.run_id
        assert text_of(answer.parts).startswith(f"Echo: {text_of(question.parts)} ")

    # A retried send is idempotent: same message, same run, nothing stored twice.
    again = services.send(IDENTITY, thread.id, _text("hello 0", "m000"))
    first = next(m for m in users if m.message_id == "m000")
    assert not again.created and again.run is not None and again.run.id == first.run_id
    assert Message.objects.filter(thread_id=thread.id).count() == 2 * count
    assert elapsed < 60, elapsed


def test_interrupt_cancels_the_active_run_and_its_input_runs_next() -> None:
    thread = services.create_thread(IDENTITY, agent="durable")
    first = services.send(IDENTITY, thread.id, _text("stream 5"))
    assert first.run is not None
    run_id = first.run.id
    wait_until(
        lambda: Run.objects.filter(pk=run_id, status="running").exists(),
        timeout=10,
        what="the first run to start",
    )
    queued = services.send(IDENTITY, thread.id, _text("queued behind"))
    urgent = services.send(IDENTITY, thread.id, _text("urgent"), policy="interrupt")
    assert queued.queue_item is not None and urgent.queue_item is not None
    assert urgent.queue_item.policy == "interrupt"

    cancelled = wait_terminal(first.run.id, timeout=10)
    assert cancelled.status == Run.Status.CANCELLED
    wait_until(lambda: _idle(thread.id), timeout=20, what="the queued input to be answered")
    rows = assert_transcript_integrity(thread.id)
    users = [text_of(m.parts) for m in rows if m.role == "user"]
    # The interrupting input runs next, before input queued earlier.
    assert users == ["stream 5", "urgent", "queued behind"], users
    partial = rows[1]
    assert partial.role == "assistant" and partial.run_id == first.run.id
    assert any(p["type"] == "text" for p in partial.parts)
    answers = [text_of(m.parts) for m in rows[2:] if m.role == "assistant"]
    assert answers[0].startswith("Echo: urgent ") and answers[1].startswith("Echo: queued behind")


def test_reject_policy_over_http_is_a_409_and_stores_nothing() -> None:
    client = Client(enforce_csrf_checks=True)
    token = client.get(f"{API}/session").json()["csrfToken"]
    headers = {"HTTP_X_CSRFTOKEN": token}

    def post(path: str, body: Any) -> Any:
        return client.post(
            f"{API}{path}", data=json.dumps(body), content_type="application/json", **headers
        )

    thread = post("/threads", {"agent": "durable"}).json()
    sent = post(f"/threads/{thread['id']}/messages", {"text": "stream 3"})
    assert sent.status_code == 202, sent.content
    rejected = post(f"/threads/{thread['id']}/messages", {"text": "me too", "policy": "reject"})
    assert rejected.status_code == 409, rejected.content
    assert rejected.json()["error"]["code"] == "thread_busy"
    assert not QueueItem.objects.filter(thread_id=thread["id"]).exists()
    assert Message.objects.filter(thread_id=thread["id"]).count() <= 2  # question (+ open answer)
    assert not Message.objects.filter(thread_id=thread["id"], parts__0__text="me too").exists()

    cancelled = post(f"/runs/{sent.json()['run']['id']}/cancel", {})
    assert cancelled.status_code == 200, cancelled.content
    assert wait_terminal(sent.json()["run"]["id"], timeout=10).status == "cancelled"
    assert_transcript_integrity(thread["id"])


def test_trigger_starts_a_run_without_a_user_message() -> None:
    thread = services.create_thread(IDENTITY, agent="durable")
    run = services.trigger(IDENTITY, thread.id)
    assert run.initiator == Run.Initiator.TRIGGER
    done = wait_terminal(run.id, timeout=10)
    assert done.status == Run.Status.COMPLETED, done.error
    rows = assert_transcript_integrity(thread.id)
    assert [(m.role, m.run_id) for m in rows] == [("assistant", run.id)]
    assert text_of(rows[0].parts).startswith("Echo: ")


def test_steer_joins_the_active_run_at_its_next_model_step(tmp_path: Any) -> None:
    thread = services.create_thread(IDENTITY, agent="durable")
    effects = tmp_path / "tool.log"
    first = services.send(IDENTITY, thread.id, _text(f"tool 1.5 {effects}"))
    assert first.run is not None
    wait_until(
        lambda: effects.exists() and "start" in effects.read_text(),
        timeout=10,
        what="the tool to start",
    )
    # Sent while the tool runs: taken into the same run before its next model step.
    steered = services.send(IDENTITY, thread.id, _text("also this"), policy="steer")
    assert steered.queue_item is not None and steered.run is not None
    assert steered.run.id == first.run.id
    done = wait_terminal(first.run.id, timeout=15)
    assert done.status == Run.Status.COMPLETED, done.error

    assert Run.objects.filter(thread_id=thread.id).count() == 1  # no run of its own
    item = QueueItem.objects.get(pk=steered.queue_item.pk)
    assert item.status == QueueItem.Status.ADMITTED and item.run_id == first.run.id
    rows = assert_transcript_integrity(thread.id)
    assert [(m.role, m.run_id, m.step_index) for m in rows] == [
        ("user", first.run.id, None),
        ("assistant", first.run.id, 0),
        ("user", first.run.id, None),
        ("assistant", first.run.id, 1),
    ]
    assert rows[2].message_id == steered.queue_item.message_id
    assert text_of(rows[2].parts) == "also this"
    # The second model step saw the steering input as the latest user message.
    assert text_of(rows[3].parts).startswith("Echo: also this ")


def test_a_model_failure_after_a_checkpoint_leaves_no_open_message() -> None:
    thread = services.create_thread(IDENTITY, agent="durable")
    sent = services.send(IDENTITY, thread.id, _text("fail 2.5"))
    assert sent.run is not None
    done = wait_terminal(sent.run.id, timeout=15)
    assert done.status == Run.Status.FAILED
    assert done.error and "broke mid-stream" in done.error["message"]
    rows = assert_transcript_integrity(thread.id)
    assert [(m.role, m.status) for m in rows] == [("user", "committed"), ("assistant", "committed")]
    assert text_of(rows[1].parts)  # the streamed part was kept, settled
