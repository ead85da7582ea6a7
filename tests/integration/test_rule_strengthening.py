"""Rules that were tested on the in-memory store only, run by real hooks on every store.

Each case drives the engine with a ScriptedModel against the engine's in-memory store and
the ORM store on the run's database (SQLite, or PostgreSQL with ``DATABASE_URL``), so a
backend that builds its facade or compares its bags differently fails here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from pai_agents import RunEngine, RunOutcome, ScriptedModel, ScriptedStep, define_agent
from pai_agents.abort import AbortSignal
from pai_agents.engine.memory import InMemoryThreadStore
from pai_agents.engine.store import ThreadStore
from pai_agents.lifecycle import MetadataSchemas, MutationConflict
from pai_agents.messages.types import UIMessage
from pai_agents.models.base import ModelRequest, StepStreamPart
from pai_threads import services
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Thread
from pai_threads.store.db import run_db_closing
from pai_threads.store.thread_store import ORMThreadStore
from tests.support.keyed_metadata import Empty, Keyed

SCOPE = "user:alice"
ALICE = Identity(scope_key=SCOPE, data={"userId": "alice"})


def _user(text: str) -> UIMessage:
    return {"id": "", "role": "user", "parts": [{"type": "text", "text": text}]}


@dataclass
class Stores:
    """One backend: where a thread is created, a message sent, and a run executed."""

    name: str
    store: ThreadStore
    create: Callable[..., Any]
    send: Callable[[str, str], Any]
    version: Callable[[str], Any]
    state: Callable[[str], Any]

    async def run(
        self, run_id: str, lifecycle: Any, steps: list[ScriptedStep], **engine: Any
    ) -> RunOutcome:
        model = engine.pop("model", None) or ScriptedModel(steps=steps)
        agent = engine.pop("agent", None) or define_agent(
            "rules", instructions="x", model=model, lifecycle=lifecycle
        )
        claim = await self.store.claim_run(run_id, owner="w1", lease_seconds=30)
        return await RunEngine(agent=agent, store=self.store, **engine).run_episode(claim)


def _memory() -> Stores:
    store = InMemoryThreadStore()

    async def create(agent: str | None = None) -> str:
        return store.create_thread(scope_key=SCOPE, agent_name=agent or "rules")

    async def send(thread_id: str, text: str) -> str:
        message = _user(text)
        message["id"] = f"u-{len(store.messages)}"
        return store.send(thread_id, message)

    async def version(thread_id: str) -> int:
        return store.lifecycle.thread_version(SCOPE, thread_id)

    async def state(thread_id: str) -> list[UIMessage]:
        return store.client_messages(thread_id)

    return Stores("memory", store, create, send, version, state)


def _orm() -> Stores:
    async def create(agent: str | None = None) -> str:
        return await run_db_closing(lambda: services.create_thread(ALICE, agent=agent).id)

    async def send(thread_id: str, text: str) -> str:
        def sent() -> str:
            message = {"role": "user", "parts": [{"type": "text", "text": text}]}
            result = services.send(ALICE, thread_id, message, dispatch=False)
            assert result.run is not None
            return result.run.id

        return await run_db_closing(sent)

    async def version(thread_id: str) -> int:
        return await run_db_closing(lambda: Thread.objects.get(id=thread_id).version)

    async def state(thread_id: str) -> list[dict[str, Any]]:
        """What a client loads: the transcript page of the messages endpoint."""

        def read() -> list[dict[str, Any]]:
            page = services.list_messages(ALICE, thread_id)
            return [m.to_ui_message() for m in page.items]

        return await run_db_closing(read)

    return Stores("orm", ORMThreadStore(), create, send, version, state)


@pytest.fixture(
    params=["memory", pytest.param("orm", marks=pytest.mark.django_db(transaction=True))]
)
def stores(request: pytest.FixtureRequest) -> Stores:
    return _memory() if request.param == "memory" else _orm()


async def test_lc_049_the_engine_hands_the_resolver_a_facade_without_visibility_writes(
    stores: Stores,
) -> None:
    """LC-049: in a real run, ``resolve_model_context`` gets a facade whose ``messages`` and
    whose ``tx.messages`` inside ``mutate()`` have no ``update_visibility``; the other phases
    of the same step (prepare_run, prepare_model_step, after_step) keep it."""
    seen: dict[str, bool] = {}

    def has_it(phase: str) -> Callable[[Any], None]:
        def hook(input: Any) -> None:
            seen[phase] = hasattr(input.thread.messages, "update_visibility")

        return hook

    async def resolve_model_context(input: Any, next: Any) -> Any:
        seen["resolver"] = hasattr(input.thread.messages, "update_visibility")

        def inside(tx: Any) -> None:
            seen["resolver tx"] = hasattr(tx.messages, "update_visibility")

        await input.thread.mutate(inside)
        return await next()

    lifecycle = {
        "prepare_run": has_it("prepare_run"),
        "prepare_model_step": has_it("prepare_model_step"),
        "resolve_model_context": resolve_model_context,
        "after_step": has_it("after_step"),
    }
    thread_id = await stores.create()
    run_id = await stores.send(thread_id, "hello")
    outcome = await stores.run(run_id, lifecycle, [ScriptedStep.reply("ok")])
    assert outcome.status == "completed"
    assert seen == {
        "prepare_run": True,
        "prepare_model_step": True,
        "resolver": False,
        "resolver tx": False,
        "after_step": True,
    }


async def test_lc_039_expected_private_metadata_survives_runs_steps_and_public_writes(
    stores: Stores,
) -> None:
    """LC-039: a mutation conditioned on ``expected_private_metadata`` commits after the
    thread went through unrelated revisions (a whole earlier run with its status changes and
    usage, a committed step, a public metadata write, a new run's claim), which make an
    ``expected_version`` read back then stale; a different private bag still rejects it
    and writes nothing."""
    seen: dict[str, Any] = {}

    async def first_prepare(input: Any) -> None:
        await input.thread.private_metadata.replace({"cursor": "c1"})
        seen["version"] = await stores.version(input.thread.thread_id)

    async def second_prepare(input: Any) -> None:
        await input.thread.metadata.merge({"topic": "billing"})

    async def second_after_step(input: Any) -> None:
        thread = input.thread

        def write(tx: Any) -> None:
            tx.metadata.merge({"checked": True})

        with pytest.raises(MutationConflict):
            await thread.mutate(write, expected_version=seen["version"])
        with pytest.raises(MutationConflict):
            await thread.mutate(write, expected_private_metadata={"cursor": "c0"})
        seen["before"] = await thread.metadata.get()
        await thread.mutate(write, expected_private_metadata={"cursor": "c1"})
        seen["after"] = await thread.metadata.get()

    thread_id = await stores.create()
    first = await stores.send(thread_id, "one")
    first_run = await stores.run(
        first, {"prepare_run": first_prepare}, [ScriptedStep.reply("first answer")]
    )
    assert first_run.status == "completed"
    second = await stores.send(thread_id, "two")
    lifecycle = {"prepare_run": second_prepare, "after_step": second_after_step}
    outcome = await stores.run(second, lifecycle, [ScriptedStep.reply("second answer")])
    assert outcome.status == "completed"
    assert await stores.version(thread_id) != seen["version"]
    assert seen["before"] == {"topic": "billing"}, "the rejected mutations wrote nothing"
    assert seen["after"] == {"topic": "billing", "checked": True}


@dataclass(kw_only=True)
class PausingModel(ScriptedModel):
    """A ScriptedModel that stops after its ``pause_after``-th text delta until released."""

    pause_after: int = 3
    paused: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def stream(
        self, request: ModelRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StepStreamPart]:
        deltas = 0
        async for part in super().stream(request, signal=signal):
            yield part
            deltas += part["type"] == "text-delta"
            if deltas == self.pause_after:
                self.paused.set()
                await self.release.wait()


async def test_mf_025_the_streaming_step_is_an_open_message_in_the_thread_state(
    stores: Stores,
) -> None:
    """MF-025: while a step streams, the thread's state (what a client loads) holds it as an
    ordinary assistant message with ``metadata.pai.status == "open"`` and the text so far;
    once the step ends, the same message id is ``committed`` with the whole text."""
    answer = "a long answer streamed in small pieces"
    model = PausingModel(steps=[ScriptedStep.reply(answer, chunk_size=4)])
    thread_id = await stores.create()
    run_id = await stores.send(thread_id, "hello")
    run = asyncio.create_task(stores.run(run_id, None, [], model=model, checkpoint_seconds=0))
    await asyncio.wait_for(model.paused.wait(), timeout=30)

    user, open_message = await stores.state(thread_id)
    assert user["role"] == "user" and open_message["role"] == "assistant"
    assert open_message["metadata"]["pai"]["status"] == "open"
    assert open_message["metadata"]["pai"]["runId"] == run_id
    streamed = "".join(p.get("text", "") for p in open_message["parts"] if p["type"] == "text")
    assert streamed and answer.startswith(streamed) and streamed != answer

    model.release.set()
    assert (await asyncio.wait_for(run, timeout=30)).status == "completed"
    _, final = await stores.state(thread_id)
    assert final["id"] == open_message["id"]
    assert final["metadata"]["pai"]["status"] == "committed"
    assert [p["text"] for p in final["parts"] if p["type"] == "text"] == [answer]


async def test_ad_032_default_factories_run_for_each_persisted_run(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AD-032: each run of a thread starts from its own parse of ``{}``: a default factory's
    value (a per-run key) differs between runs, and a list a hook filled in one run is empty
    in the next. One parse made at registration and copied per run passes ``is not`` checks
    but gives every run the same key, and fails here."""
    read: list[dict[str, Any]] = []

    async def prepare_run(input: Any) -> None:
        bag = await input.run.private_metadata.get()
        read.append(dict(bag))
        await input.run.private_metadata.merge({"seen": [*bag["seen"], "this run"]})

    agent = define_agent(
        "keyed",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep.reply("one"), ScriptedStep.reply("two")]),
        lifecycle={"prepare_run": prepare_run},
        run_metadata=MetadataSchemas(private=Keyed, public=Empty),
    )
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)
    thread_id = await stores.create("keyed")
    for text in ("first", "second"):
        run_id = await stores.send(thread_id, text)
        assert (await stores.run(run_id, None, [], agent=agent)).status == "completed"
    first, second = read
    assert first["seen"] == second["seen"] == []
    assert first["key"] != second["key"], "the factory ran again for the second run"
