"""Enriching a finished run's metadata through the trusted ``thread.runs`` facade (LC-034)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import RunEngine, ScriptedModel, ScriptedStep, define_agent
from pai_agents.engine.store import LeaseLost
from pai_agents.lifecycle import MetadataSchemas
from pai_agents.lifecycle.metadata import InvalidMetadata
from pai_threads import services, trusted_thread
from pai_threads.errors import NotFound
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Run
from pai_threads.store.thread_store import ORMThreadStore
from pai_threads.websocket.snapshot import run_public

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "inv-SECRET-0042"


class Billing(BaseModel):
    invoice: str = ""
    cents: int = 0


class Review(BaseModel):
    rating: str = "none"
    reviewed: bool = False


kept: dict[str, Any] = {}


async def _keep(input: Any) -> None:
    """A hook that keeps its run-metadata clients past the episode (what LC-034 forbids)."""
    kept["private"], kept["public"] = input.run.private_metadata, input.run.metadata
    await input.run.metadata.merge({"rating": "pending"})


@pytest.fixture
def agent(monkeypatch: pytest.MonkeyPatch) -> Any:
    kept.clear()
    definition = define_agent(
        "billed",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep.reply("done")] * 2),
        lifecycle={"prepare_run": _keep},
        run_metadata=MetadataSchemas(private=Billing, public=Review),
    )
    agents = {**registry.agents(), definition.name: definition}
    monkeypatch.setattr(registry, "agents", lambda: agents)
    return definition


def _finished_run(identity: Identity, agent: Any) -> Run:
    thread = services.create_thread(identity, agent="billed")
    sent = services.send(
        identity, thread.id, {"parts": [{"type": "text", "text": "hi"}]}, dispatch=False
    )
    assert sent.run is not None

    async def execute() -> Any:
        store = ORMThreadStore()
        claim = await store.claim_run(sent.run.id, owner="w1", lease_seconds=30)
        return await RunEngine(agent=agent, store=store).run_episode(claim)

    assert asyncio.run(execute()).status == "completed"
    return Run.objects.get(id=sent.run.id)


def test_lc_034_retained_lifecycle_clients_are_rejected_after_the_run(
    alice: Identity, agent: Any
) -> None:
    """LC-034, LC-032: a run-metadata client kept from a hook raises LeaseLost once the run
    is terminal; nothing is written."""
    run = _finished_run(alice, agent)
    for client, patch in (
        (kept["private"], {"invoice": "late"}),
        (kept["public"], {"rating": "x"}),
    ):
        with pytest.raises(LeaseLost):
            asyncio.run(client.merge(patch))
    run.refresh_from_db()
    assert run.private_metadata == {"invoice": "", "cents": 0}
    assert run.metadata == {"rating": "pending", "reviewed": False}


def test_lc_034_trusted_runs_facade_enriches_a_terminal_run(
    alice: Identity, agent: Any, published: list[dict[str, Any]]
) -> None:
    """LC-034, LC-024, LC-025, LC-027, LC-029: after completion trusted code merges and
    replaces both bags through ``trusted_thread(...).runs.get(...)``, validated against the
    agent's run schemas; the public bag reaches client run state (projection and event),
    the private one never does."""
    run = _finished_run(alice, agent)
    published.clear()
    facade = trusted_thread(run.thread_id).runs.get(run.id)

    merged = facade.private_metadata.merge({"invoice": SECRET})
    assert merged == {"invoice": SECRET, "cents": 0}
    assert published == []  # a private change publishes nothing
    assert asyncio.run(facade.private_metadata.amerge({"cents": 1250})) == {
        "invoice": SECRET,
        "cents": 1250,
    }
    assert facade.metadata.merge({"rating": "good"}) == {"rating": "good", "reviewed": False}
    assert facade.metadata.replace({"reviewed": True}) == {"rating": "none", "reviewed": True}
    with pytest.raises(InvalidMetadata):
        facade.metadata.merge({"reviewed": "maybe"})  # the merged bag is validated whole
    assert facade.metadata.get() == {"rating": "none", "reviewed": True}

    run.refresh_from_db()
    assert run.status == "completed"
    assert run.private_metadata == {"invoice": SECRET, "cents": 1250}
    projected = run_public(run)
    assert projected["metadata"] == {"rating": "none", "reviewed": True}
    assert SECRET not in json.dumps(projected)
    assert [e["type"] for e in published] == ["run.status", "run.status"]
    assert published[-1]["run"]["metadata"] == {"rating": "none", "reviewed": True}
    assert SECRET not in json.dumps(published)


def test_lc_034_the_facade_is_bound_to_its_thread_and_scope(alice: Identity, agent: Any) -> None:
    """LC-034, LC-004: a run of another thread, or a thread of another partition, is
    NotFound; the top-level package re-exports the facade lazily."""
    run = _finished_run(alice, agent)
    other = services.create_thread(alice, agent="billed")
    with pytest.raises(NotFound):
        trusted_thread(other.id).runs.get(run.id)
    with pytest.raises(NotFound):
        trusted_thread(run.thread_id, scope_key="user:bob").runs.get(run.id)
    scoped = trusted_thread(run.thread_id, scope_key=alice.scope_key).runs.get(run.id)
    assert scoped.metadata.get() == {"rating": "pending", "reviewed": False}
    assert asyncio.run(trusted_thread(run.thread_id).runs.aget(run.id)).run_id == run.id
