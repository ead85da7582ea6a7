"""A send to a thread this process created or read skips the thread's read
(pai_threads.store.thread_headers): the header (id, scope, agent) is remembered, the row
still decides. These tests hold the ways a remembered header could be wrong: another
tenant's identity, a thread deleted elsewhere, an agent that differs from the row's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from pai_agents import ScriptedModel, ScriptedStep, define_agent
from pai_threads import services
from pai_threads.errors import NotFound
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Thread
from pai_threads.store import thread_headers
from pai_threads.store.thread_headers import known_thread, remember_thread

pytestmark = [pytest.mark.django_db(transaction=True)]

AGENTS = ("headers-a", "headers-b")
ALICE = Identity(scope_key="test:headers:alice", data={"userId": "alice"})
MALLORY = Identity(scope_key="test:headers:mallory", data={"userId": "mallory"})


@pytest.fixture(autouse=True)
def _agents() -> Iterator[None]:
    agents = [
        define_agent(name, instructions="x", model=ScriptedModel(steps=[ScriptedStep.reply("ok")]))
        for name in AGENTS
    ]
    with override_settings(PAI={**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], *agents]}):
        yield


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "text": text}]}


def _thread_reads(queries: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith("SELECT") and '"pai_threads_thread"' in q["sql"]
    ]


def test_a_send_to_a_thread_this_process_created_does_not_read_it() -> None:
    thread = services.create_thread(ALICE, agent=AGENTS[0])
    with CaptureQueriesContext(connection) as queries:
        result = services.send(ALICE, thread.id, _user("hi"), dispatch=False)
    assert _thread_reads(queries) == []
    assert result.run is not None and result.run.agent_name == AGENTS[0]
    assert Message.objects.filter(run=result.run, role="user").count() == 1


def test_another_scope_cannot_send_through_a_remembered_thread() -> None:
    thread = services.create_thread(ALICE, agent=AGENTS[0])
    assert known_thread(thread.id, ALICE.scope_key) is not None
    with pytest.raises(NotFound):
        services.send(MALLORY, thread.id, _user("let me in"), dispatch=False)
    assert not Run.objects.filter(thread_id=thread.id).exists()
    assert not Message.objects.filter(thread_id=thread.id).exists()


def test_a_remembered_thread_deleted_elsewhere_is_not_found_and_forgotten() -> None:
    thread = services.create_thread(ALICE, agent=AGENTS[0])
    Thread.objects.filter(pk=thread.pk).delete()  # as another process would: still remembered
    assert known_thread(thread.id, ALICE.scope_key) is not None
    with pytest.raises(NotFound):
        services.send(ALICE, thread.id, _user("anyone?"), dispatch=False)
    assert not Run.objects.filter(thread_id=thread.id).exists()
    assert known_thread(thread.id, ALICE.scope_key) is None


def test_the_row_decides_when_the_remembered_agent_differs() -> None:
    """The fused send's thread touch checks the remembered agent against the row; on a
    mismatch nothing is stored and the send reads the thread (PostgreSQL's fused path)."""
    if connection.vendor != "postgresql":
        pytest.skip("the fused send (which checks the header against the row) is PostgreSQL's")
    thread = services.create_thread(ALICE, agent=AGENTS[0])
    Thread.objects.filter(pk=thread.pk).update(agent_name=AGENTS[1])
    result = services.send(ALICE, thread.id, _user("hi"), dispatch=False)
    assert result.run is not None and result.run.agent_name == AGENTS[1]
    assert Run.objects.filter(thread_id=thread.id).count() == 1


def test_a_remembered_thread_reads_its_other_fields_from_the_row() -> None:
    thread = services.create_thread(ALICE, agent=AGENTS[0], title="Plans")
    header = known_thread(thread.id, ALICE.scope_key)
    assert header is not None
    assert header.get_deferred_fields() >= {"title", "archived", "updated_at"}
    with CaptureQueriesContext(connection) as queries:
        assert header.title == "Plans"
    assert len(queries.captured_queries) == 1


def test_the_process_remembers_a_bounded_number_of_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(thread_headers, "MAX_THREADS", 2)
    threads = [services.create_thread(ALICE, agent=AGENTS[0]) for _ in range(3)]
    assert known_thread(threads[0].id, ALICE.scope_key) is None
    assert known_thread(threads[2].id, ALICE.scope_key) is not None
    remember_thread(threads[0])  # read again: remembered again, the oldest goes
    assert known_thread(threads[1].id, ALICE.scope_key) is None
