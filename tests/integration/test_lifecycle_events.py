"""Realtime events of lifecycle facade writes on the ORM store (LC-029..LC-031).

``realtime.delivery.publish_inline`` (where in-process publishing ends) is replaced by a
recorder, so each test sees exactly the events the facade hands to the realtime layer after
its writes commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db.models import F

from pai_agents import RunEngine, ScriptedModel, ScriptedStep, define_agent
from pai_agents.engine.store import LeaseLost
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Run
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "s3cret-private-value"


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []

    def record(thread_id: str, batch: Sequence[dict[str, Any]]) -> list[Any]:
        events.extend({**e, "_thread": thread_id} for e in batch)
        return list(batch)

    monkeypatch.setattr("pai_threads.realtime.delivery.publish_inline", record)
    return events


def _send(identity: Identity) -> services.SendResult:
    thread = services.create_thread(identity)
    return services.send(
        identity,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": "hello"}]},
        dispatch=False,
    )


async def _execute(run_id: str, lifecycle: Any) -> Any:
    store = ORMThreadStore()
    agent = define_agent(
        "orm-lc-events",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep.reply("ok")]),
        lifecycle=lifecycle,
    )
    claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
    return await RunEngine(agent=agent, store=store).run_episode(claim)


def _kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_lc_029_lc_030_committed_writes_publish_public_projections_only(
    alice: Identity, published: list[dict[str, Any]]
) -> None:
    """LC-029, LC-030: public thread metadata reaches clients as the thread head, public run
    metadata as the run, a transcript-visible appended message as ``message.committed``;
    private thread/run/message metadata and model-only notes are in no payload."""

    async def prepare_run(input: Any) -> None:
        await input.thread.private_metadata.merge({"cursor": SECRET})
        await input.thread.metadata.merge({"topic": "billing"})
        await input.run.private_metadata.merge({"trace": SECRET})
        await input.run.metadata.merge({"rating": "good"})
        await input.thread.messages.append(
            role="assistant",
            parts=[{"type": "text", "text": "visible note"}],
            metadata={"kind": "note"},
            private_metadata={"audit": SECRET},
        )
        await input.thread.messages.append(
            role="system",
            parts=[{"type": "text", "text": "model-only"}],
            visibility={"transcript": False},
        )

    result = _send(alice)
    published.clear()  # the send's own events: these tests look at the run's
    outcome = asyncio.run(_execute(result.run.id, {"prepare_run": prepare_run}))
    assert outcome.status == "completed"
    assert SECRET not in json.dumps(published)
    assert "model-only" not in json.dumps(published)
    assert all(e["_thread"] == result.run.thread_id for e in published)
    heads = [e for e in published if e["type"] == "thread.updated"]
    assert len(heads) == 1  # the private-only merge published none (LC-031)
    assert heads[0]["thread"]["metadata"] == {"topic": "billing"}
    assert "privateMetadata" not in heads[0]["thread"]
    runs = [e for e in published if e["type"] == "run.status"]
    assert len(runs) == 1  # the private run merge published nothing
    assert runs[0]["run"]["metadata"] == {"rating": "good"}
    assert runs[0]["runId"] == result.run.id
    committed = [e for e in published if e["type"] == "message.committed"]
    assert [e["message"]["parts"][0]["text"] for e in committed] == ["visible note"]
    assert committed[0]["message"]["metadata"]["kind"] == "note"
    assert committed[0]["message"]["metadata"]["pai"]["producer"] == "lifecycle"


def test_lc_031_private_only_writes_publish_no_thread_head(
    alice: Identity, published: list[dict[str, Any]]
) -> None:
    """LC-031: a write (or a whole mutate) that changes only thread private metadata
    publishes no client-visible event; a public merge to an equal value publishes none."""

    async def prepare_run(input: Any) -> None:
        await input.thread.private_metadata.merge({"cursor": SECRET})

        async def private_only(tx: Any) -> None:
            await tx.private_metadata.replace({"cursor": SECRET, "n": 2})
            await tx.metadata.merge({})

        await input.thread.mutate(private_only)

    result = _send(alice)
    published.clear()  # the send's own events: these tests look at the run's
    assert asyncio.run(_execute(result.run.id, {"prepare_run": prepare_run})).status == (
        "completed"
    )
    assert published == []


def test_lc_029_a_rejected_write_publishes_nothing(
    alice: Identity, published: list[dict[str, Any]]
) -> None:
    """LC-029: a facade write rejected by the lease fence (or a mutate whose callback
    raises) publishes nothing."""
    errors: list[str] = []

    async def prepare_run(input: Any) -> None:
        async def failing(tx: Any) -> None:
            await tx.metadata.merge({"topic": "never"})
            raise RuntimeError("boom")

        try:
            await input.thread.mutate(failing)
        except RuntimeError:
            errors.append("mutate")
        await sync_to_async(
            lambda: Run.objects.filter(id=input.run.run_id).update(lease_token=F("lease_token") + 1)
        )()
        for write in (
            lambda: input.thread.metadata.merge({"topic": "late"}),
            lambda: input.run.metadata.merge({"rating": "late"}),
            lambda: input.thread.messages.append(
                role="assistant", parts=[{"type": "text", "text": "late"}]
            ),
        ):
            try:
                await write()
            except LeaseLost:
                errors.append("lease")

    result = _send(alice)
    published.clear()  # the send's own events: these tests look at the run's
    with contextlib.suppress(LeaseLost):  # the engine's own later write is fenced too
        asyncio.run(_execute(result.run.id, {"prepare_run": prepare_run}))
    assert errors == ["mutate", "lease", "lease", "lease"]
    assert published == []
