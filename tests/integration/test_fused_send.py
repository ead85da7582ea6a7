"""A send to an idle thread is one statement on PostgreSQL (pai_threads.store.fused_send).

Outside a transaction, ``services.send`` touches the thread and inserts the run and its user
message in one data-modifying statement when the thread has no active run; everything else
(a busy thread, a reused message id, a concurrent send that won) falls back to the locking
path with nothing of the statement stored. These tests pin both halves, including the race
the statement's snapshot cannot see.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pai_agents import ScriptedModel, ScriptedStep, define_agent
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, QueueItem, Run, Thread
from pai_threads.store.fused_send import FusedSend, can_fuse_send, start_run_fused

pytestmark = [pytest.mark.django_db(transaction=True)]

AGENT = "fused-send"
IDENTITY = Identity(scope_key="test:fused", data={"userId": "fused"})


@pytest.fixture(autouse=True)
def _agent() -> Iterator[None]:
    agent = define_agent(
        AGENT, instructions="x", model=ScriptedModel(steps=[ScriptedStep.reply("ok")])
    )
    with override_settings(PAI={**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], agent]}):
        yield


@pytest.fixture
def postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the fused send is PostgreSQL's (SQLite has no data-modifying CTEs)")


def _text(text: str, message_id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "parts": [{"type": "text", "text": text}]}
    if message_id:
        message["id"] = message_id
    return message


def _rows(thread_id: str) -> tuple[int, int, int]:
    return (
        Run.objects.filter(thread_id=thread_id).count(),
        Message.objects.filter(thread_id=thread_id).count(),
        QueueItem.objects.filter(thread_id=thread_id).count(),
    )


def _sent_statements(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries]


def _new_objects(thread: Thread, message_id: str = "msg_new") -> tuple[Run, Message]:
    run = Run(thread=thread, scope_key=thread.scope_key, agent_name=thread.agent_name)
    message = Message(
        message_id=message_id,
        thread=thread,
        scope_key=thread.scope_key,
        run=run,
        role="user",
        parts=[{"type": "text", "text": "hi"}],
        metadata={},
        producer=Message.Producer.SEND,
        relation=Message.Relation.INPUT,
    )
    return run, message


def test_an_idle_thread_gets_its_run_and_message_in_one_statement(
    postgres: None, published: list[dict[str, Any]]
) -> None:
    thread = services.create_thread(IDENTITY, agent=AGENT)
    before = Thread.objects.get(pk=thread.pk).updated_at
    with CaptureQueriesContext(connection) as queries:
        result = services.send(IDENTITY, thread.id, _text("hello"), dispatch=False)
    sent = _sent_statements(queries)
    # One statement: no BEGIN/COMMIT, no separate inserts, and no read of the thread this
    # process created (store.thread_headers).
    assert len(sent) == 1, sent
    assert sent[0].startswith("WITH pai_touch AS (UPDATE")
    assert result.created and result.run is not None and result.message is not None
    run = Run.objects.get(pk=result.run.pk)
    stored = Message.objects.get(pk=result.message.pk)  # the key came back from the statement
    assert run.status == Run.Status.QUEUED and run.agent_name == AGENT
    assert stored.run_id == run.id and stored.role == "user"
    assert stored.producer == Message.Producer.SEND and stored.relation == Message.Relation.INPUT
    assert stored.parts == [{"type": "text", "text": "hello"}]
    assert Thread.objects.get(pk=thread.pk).updated_at > before
    assert [e["type"] for e in published][:2] == ["message.committed", "run.status"]
    assert published[0]["message"]["id"] == stored.message_id
    assert published[1]["status"] == "queued" and published[1]["runId"] == run.id


def test_a_busy_thread_falls_back_to_its_send_policy(postgres: None) -> None:
    thread = services.create_thread(IDENTITY, agent=AGENT)
    first = services.send(IDENTITY, thread.id, _text("one"), dispatch=False)
    second = services.send(IDENTITY, thread.id, _text("two"), dispatch=False, policy="queue")
    assert second.queue_item is not None and second.run is not None
    assert second.run.pk == first.run.pk  # type: ignore[union-attr]
    assert _rows(thread.id) == (1, 1, 1)  # the fused statement stored nothing


def test_a_retried_client_id_returns_the_original_send(postgres: None) -> None:
    thread = services.create_thread(IDENTITY, agent=AGENT)
    first = services.send(IDENTITY, thread.id, _text("one", "msg_client_1"), dispatch=False)
    Run.objects.filter(pk=first.run.pk).update(status=Run.Status.COMPLETED)  # type: ignore[union-attr]
    retry = services.send(IDENTITY, thread.id, _text("one", "msg_client_1"), dispatch=False)
    assert not retry.created
    assert retry.run is not None and retry.run.pk == first.run.pk  # type: ignore[union-attr]
    assert _rows(thread.id) == (1, 1, 0)


def test_nothing_is_stored_when_the_statement_fails(postgres: None) -> None:
    """A unique violation aborts the whole statement: no run, no message, no touch."""
    thread = services.create_thread(IDENTITY, agent=AGENT)
    first = services.send(IDENTITY, thread.id, _text("one", "msg_taken"), dispatch=False)
    Run.objects.filter(pk=first.run.pk).update(status=Run.Status.COMPLETED)  # type: ignore[union-attr]
    touched = Thread.objects.get(pk=thread.pk).updated_at
    run, message = _new_objects(thread, "msg_taken")
    # Without the duplicate check the message insert itself violates the unique id.
    assert start_run_fused(thread, run, message, client_id=False) is FusedSend.FALLBACK
    assert _rows(thread.id) == (1, 1, 0)
    assert Thread.objects.get(pk=thread.pk).updated_at == touched


def test_a_deleted_thread_is_gone(postgres: None) -> None:
    thread = services.create_thread(IDENTITY, agent=AGENT)
    run, message = _new_objects(thread)
    Thread.objects.filter(pk=thread.pk).delete()
    assert start_run_fused(thread, run, message, client_id=False) is FusedSend.GONE
    assert not Run.objects.filter(pk=run.pk).exists()


def test_inside_a_transaction_the_send_takes_the_locking_path(postgres: None) -> None:
    thread = services.create_thread(IDENTITY, agent=AGENT)
    assert can_fuse_send()
    with transaction.atomic():
        assert not can_fuse_send()
        with CaptureQueriesContext(connection) as queries:
            services.send(IDENTITY, thread.id, _text("hello"), dispatch=False)
    assert not any(q.startswith("WITH pai_touch") for q in _sent_statements(queries))
    assert _rows(thread.id) == (1, 1, 0)


def _waiting_for_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


def test_a_concurrent_send_that_wins_the_race_leaves_this_one_queued(postgres: None) -> None:
    """The statement's snapshot is taken before it waits for the thread's lock, so it cannot
    see a run committed meanwhile: the one-active-run index rejects its run, and the send
    falls back and queues its input behind the winner's run."""
    thread = services.create_thread(IDENTITY, agent=AGENT)
    locked, go = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def winner() -> None:
        try:
            with transaction.atomic():
                Thread.objects.filter(pk=thread.pk).update(updated_at=timezone.now())
                run, _ = _new_objects(thread)
                run.save()
                outcome["won"] = run.pk
                locked.set()
                go.wait(10)
        finally:
            connection.close()

    def loser() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                outcome["pid"] = cursor.fetchone()[0]
            outcome["result"] = services.send(
                IDENTITY, thread.id, _text("loser"), dispatch=False, policy="queue"
            )
        except BaseException as exc:  # reported by the test below
            outcome["error"] = exc
        finally:
            connection.close()

    first = threading.Thread(target=winner)
    first.start()
    assert locked.wait(10)
    second = threading.Thread(target=loser)
    second.start()
    try:
        deadline = time.monotonic() + 10
        while "pid" not in outcome or not _waiting_for_a_lock(outcome["pid"]):
            assert time.monotonic() < deadline, "the send never waited for the thread's lock"
            assert second.is_alive(), outcome
            time.sleep(0.01)
    finally:
        go.set()  # the winner's run commits while the fused statement waits for the lock
        first.join(10)
        second.join(10)
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    assert result.queue_item is not None and result.run.pk == outcome["won"]
    assert _rows(thread.id) == (1, 0, 1)
