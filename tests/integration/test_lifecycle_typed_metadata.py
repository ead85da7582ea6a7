"""Typed metadata on the ORM: defaults, validated facade writes, public-only projections."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from django.test import Client
from pydantic import BaseModel

from pai_agents import ScriptedModel, ScriptedStep, define_agent
from pai_agents.lifecycle import MetadataSchemas
from pai_threads import services
from pai_threads.execution import registry
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Message, QueueItem, Run, Thread
from pai_threads.realtime import delivery
from pai_threads.store.admission import admit_next
from pai_threads.websocket.snapshot import build_snapshot

SECRET = "SECRET-7f3a"


class RunPrivate(BaseModel):
    cost: int = 0
    note: str = ""


class RunPublic(BaseModel):
    rating: str = "none"


class ThreadPrivate(BaseModel):
    cursor: str = ""


class ThreadPublic(BaseModel):
    topic: str = "general"


class MessagePrivate(BaseModel):
    source: str = ""


class MessagePublic(BaseModel):
    kind: str = "note"


SCHEMAS = {
    "run_metadata": MetadataSchemas(private=RunPrivate, public=RunPublic),
    "thread_metadata": MetadataSchemas(private=ThreadPrivate, public=ThreadPublic),
    "message_metadata": MetadataSchemas(private=MessagePrivate, public=MessagePublic),
}
seen: dict[str, Any] = {}


async def _prepare_run(input: Any) -> None:
    """Writes private values everywhere, public ones beside them, and tries invalid ones."""
    await input.run.private_metadata.merge({"note": SECRET})
    await input.run.metadata.merge({"rating": "good"})
    await input.thread.private_metadata.merge({"cursor": SECRET})
    await input.thread.metadata.merge({"topic": "billing"})
    await input.thread.messages.append(
        role="system",
        parts=[{"type": "text", "text": "context note"}],
        metadata={"kind": "memo"},
        private_metadata={"source": SECRET},
    )
    for name, call in (
        ("run", lambda: input.run.private_metadata.merge({"cost": "lots"})),
        ("thread", lambda: input.thread.metadata.merge({"topic": 5})),
    ):
        try:
            await call()
        except ValueError as exc:
            seen[name] = type(exc).__name__


@pytest.fixture
def typed_agent(monkeypatch: pytest.MonkeyPatch) -> Any:
    seen.clear()
    agent = define_agent(
        "typed",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep.reply("answer")] * 4),
        lifecycle={"prepare_run": _prepare_run},
        **SCHEMAS,
    )
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)
    return agent


pytestmark = pytest.mark.django_db(transaction=True)

DEFAULT_RUN = ({"cost": 0, "note": ""}, {"rating": "none"})


def _bags(run: Run) -> tuple[dict[str, Any], dict[str, Any]]:
    run.refresh_from_db()
    return run.private_metadata, run.metadata


def _text(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "text": text}]}


def test_ad_031_every_new_run_and_thread_starts_with_parsed_defaults(
    alice: Identity, typed_agent: Any
) -> None:
    thread = services.create_thread(alice, agent="typed")
    assert (thread.private_metadata, thread.metadata) == ({"cursor": ""}, {"topic": "general"})
    sent = services.send(alice, thread.id, _text("hi"), dispatch=False)
    assert sent.run is not None and _bags(sent.run) == DEFAULT_RUN
    queued = services.send(alice, thread.id, _text("next"), dispatch=False)
    assert queued.queue_item is not None
    Run.objects.filter(pk=sent.run.pk).update(status=Run.Status.COMPLETED)
    admitted = admit_next(thread.id)
    # As inserted (admit_next dispatches it: a refresh could race its prepare_run's writes).
    assert admitted is not None
    assert (admitted.private_metadata, admitted.metadata) == DEFAULT_RUN
    assert QueueItem.objects.get(pk=queued.queue_item.pk).status == QueueItem.Status.ADMITTED
    Run.objects.filter(pk=admitted.pk).update(status=Run.Status.COMPLETED)
    Message.objects.create(
        message_id="a1", thread=thread, scope_key=thread.scope_key, role="assistant", parts=[]
    )
    regenerated = services.regenerate(alice, thread.id, dispatch=False)
    assert _bags(regenerated) == DEFAULT_RUN
    Run.objects.filter(pk=regenerated.pk).update(status=Run.Status.COMPLETED)
    triggered = services.trigger(alice, thread.id, dispatch=False)
    assert _bags(triggered) == DEFAULT_RUN
    assert _bags(triggered)[0] is not _bags(regenerated)[0]


def test_ad_033_ad_034_ad_037_ad_038_private_metadata_reaches_no_client_surface(
    alice: Identity,
    typed_agent: Any,
    api_client: Client,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """LC-025, LC-029, LC-030: typed facade writes are validated whole; private values
    appear in no HTTP response, no realtime/websocket payload and no log line."""
    published: list[Any] = []

    def record(thread_id: str, events: Any) -> list[Any]:
        published.extend(events)
        return list(events)

    # Where every in-process publication ends (runs' inline flushes, operations' events).
    monkeypatch.setattr(delivery, "publish_inline", record)
    caplog.set_level(logging.DEBUG)
    api_client.get("/")
    csrf = {"HTTP_X_CSRFTOKEN": api_client.cookies["csrftoken"].value}
    created = api_client.post(
        "/api/pai/threads",
        data=json.dumps({"agent": "typed"}),
        content_type="application/json",
        **csrf,
    ).json()
    thread = Thread.objects.get(id=created["id"])
    identity = Identity(scope_key=thread.scope_key, data={})
    sent = services.send(identity, thread.id, _text("hello"), dispatch=False)
    assert sent.run is not None
    outcome = asyncio.run(aexecute_run(sent.run.id))
    assert outcome is not None and outcome.status == "completed"

    # the writes landed, typed and validated as whole objects
    assert seen == {"run": "InvalidMetadata", "thread": "InvalidMetadata"}
    assert _bags(sent.run) == ({"cost": 0, "note": SECRET}, {"rating": "good"})
    thread.refresh_from_db()
    assert thread.private_metadata == {"cursor": SECRET}
    assert thread.metadata == {"topic": "billing"}
    note = Message.objects.get(thread=thread, role="system")
    assert note.private_metadata == {"source": SECRET} and note.metadata == {"kind": "memo"}

    responses = [
        api_client.get(f"/api/pai/threads/{thread.id}"),
        api_client.get("/api/pai/threads"),
        api_client.get(f"/api/pai/threads/{thread.id}/messages"),
        api_client.get(f"/api/pai/threads/{thread.id}/state"),
        api_client.get(f"/api/pai/runs/{sent.run.id}"),
    ]
    for response in responses:
        assert response.status_code == 200, response.content
        assert SECRET not in response.content.decode()
    state = responses[3].json()
    assert state["thread"]["metadata"] == {"topic": "billing"}
    assert state["runs"][-1]["metadata"] == {"rating": "good"}
    snapshot = json.dumps(build_snapshot(identity, thread.id), default=str)
    assert SECRET not in snapshot and "billing" in snapshot
    assert published and SECRET not in json.dumps(published, default=str)
    for record_ in caplog.records:
        assert SECRET not in record_.getMessage()
        assert SECRET not in str(getattr(record_, "__dict__", {}))


def test_ad_033_send_validates_user_message_metadata_against_the_public_schema(
    alice: Identity, typed_agent: Any
) -> None:
    """AD-033, LC-025 (send time): a user message's metadata must parse with the agent's
    ``message_metadata.public`` schema; invalid → InvalidInput (HTTP 422 invalid_input)
    and no message, run or queue item is stored; valid metadata is stored parsed."""
    from pai_threads.errors import InvalidInput

    thread = services.create_thread(alice, agent="typed")
    with pytest.raises(InvalidInput, match="message metadata"):
        services.send(alice, thread.id, {**_text("hi"), "metadata": {"kind": 5}}, dispatch=False)
    assert not Message.objects.filter(thread=thread).exists()
    assert not Run.objects.filter(thread=thread).exists()
    assert not QueueItem.objects.filter(thread=thread).exists()
    with pytest.raises(InvalidInput):
        services.send(alice, thread.id, {**_text("hi"), "metadata": {"kind": None}}, dispatch=False)
    assert not Message.objects.filter(thread=thread).exists()
    sent = services.send(alice, thread.id, {**_text("ok"), "metadata": {}}, dispatch=False)
    assert sent.message is not None
    sent.message.refresh_from_db()
    assert sent.message.metadata == {"kind": "note"}  # the parsed default


def test_ad_033_send_without_a_message_schema_accepts_any_strict_json_metadata(
    alice: Identity,
) -> None:
    """AD-033: with no ``message_metadata`` schema, user metadata is only strict JSON."""
    thread = services.create_thread(alice)
    sent = services.send(alice, thread.id, {**_text("hi"), "metadata": {"kind": 5}}, dispatch=False)
    assert sent.message is not None
    sent.message.refresh_from_db()
    assert sent.message.metadata == {"kind": 5}
