"""Operations publish their events once, after commit, whatever transport called them
(issue 10: one event vocabulary, one place that publishes).

``realtime.delivery.publish_inline`` (where in-process publishing ends) is replaced by a
recorder: every event any code path hands to subscribers passes through it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import transaction
from django.test import override_settings

from pai_agents import ScriptedModel, ScriptedStep, define_agent
from pai_threads import services
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = "events-echo"


@pytest.fixture(autouse=True)
def _agent() -> Iterator[None]:
    """A fresh scripted agent per test (a script is consumed by the runs)."""
    agent = define_agent(
        AGENT, instructions="x", model=ScriptedModel(steps=[ScriptedStep.reply("ok")] * 4)
    )
    with override_settings(PAI={**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], agent]}):
        yield


def _text(text: str, message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def _committed(events: list[dict[str, Any]]) -> list[str]:
    return [e["message"]["id"] for e in events if e["type"] == "message.committed"]


def test_a_send_publishes_its_message_run_and_side_state_once_after_commit(
    alice: Identity, published: list[dict[str, Any]]
) -> None:
    thread = services.create_thread(alice, agent=AGENT)
    with transaction.atomic():
        sent = services.send(alice, thread.id, _text("hi", "m-1"), dispatch=False)
        assert published == []  # nothing before the commit
    assert [e["type"] for e in published] == [
        "message.committed",
        "run.status",
        "queue.changed",
        "actions.changed",
    ]
    assert published[0]["message"] == sent.message_public
    assert published[1]["status"] == "queued" and published[1]["runId"] == sent.run.id

    published.clear()
    retry = services.send(alice, thread.id, _text("hi", "m-1"), dispatch=False)
    assert not retry.created and published == []  # a retry stores and announces nothing

    assert sent.run is not None
    assert asyncio.run(aexecute_run(sent.run.id)) is not None
    assert "m-1" not in _committed(published)  # the claim does not announce it again
    assert next(e["status"] for e in published if e["type"] == "run.status") == "running"


def test_a_rolled_back_operation_publishes_nothing(
    alice: Identity, published: list[dict[str, Any]]
) -> None:
    thread = services.create_thread(alice, agent=AGENT)
    with pytest.raises(RuntimeError), transaction.atomic():
        services.rename_thread(alice, thread.id, "Renamed")
        services.send(alice, thread.id, _text("hi", "m-1"), dispatch=False)
        raise RuntimeError("rolled back")
    assert published == []


def test_queued_input_is_announced_once_when_it_is_admitted(
    alice: Identity, published: list[dict[str, Any]]
) -> None:
    thread = services.create_thread(alice, agent=AGENT)
    first = services.send(alice, thread.id, _text("first", "m-1"), dispatch=False)
    queued = services.send(alice, thread.id, _text("second", "m-2"), policy="queue")
    assert queued.queue_item is not None and queued.message_public is None
    # Queued input: the active run's status and the queue holding it, no committed message.
    assert _committed(published) == ["m-1"]
    assert published[-2]["queue"]["items"][0]["messages"][0]["id"] == "m-2"

    published.clear()
    assert first.run is not None
    asyncio.run(aexecute_run(first.run.id))
    # The end of the first run admitted m-2 and dispatched its run (the thread executor).
    second = Run.objects.get(messages__message_id="m-2")
    deadline = time.monotonic() + 60
    while Run.objects.get(pk=second.pk).status in Run.ACTIVE and time.monotonic() < deadline:
        time.sleep(0.05)
    assert Run.objects.get(pk=second.pk).status == "completed"
    assert _committed(published).count("m-2") == 1  # at admission; its claim adds none
