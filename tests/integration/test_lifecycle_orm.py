"""The lifecycle facade on the ORM store: scoped, lease-fenced writes from real hooks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db.models import F

from pai_agents import RunEngine, ScriptedModel, ScriptedStep, define_agent
from pai_agents.engine.store import LeaseLost
from pai_agents.lifecycle import MutationConflict
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Thread
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)


def _send(identity: Identity, text: str = "hello") -> services.SendResult:
    thread = services.create_thread(identity)
    return services.send(
        identity,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": text}]},
        dispatch=False,
    )


async def _execute(run_id: str, lifecycle: Any, steps: list[ScriptedStep]) -> Any:
    store = ORMThreadStore()
    agent = define_agent(
        "orm-lc", instructions="x", model=ScriptedModel(steps=steps), lifecycle=lifecycle
    )
    claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
    return await RunEngine(agent=agent, store=store).run_episode(claim)


def test_lc_032_lc_035_hooks_write_through_the_orm_facade(alice: Identity) -> None:
    """LC-032, LC-035, LC-011, LC-014, LC-024, LC-027: writes during the execution land in
    the thread's rows; a model-only note (transcript=False) is stored hidden."""
    seen: dict[str, Any] = {}

    async def prepare_run(input: Any) -> None:
        seen["latest"] = input.latest_user_message
        await input.thread.messages.append(
            role="system",
            parts=[{"type": "text", "text": "note for the model"}],
            visibility={"transcript": False},
        )

        async def both(tx: Any) -> None:
            await tx.metadata.merge({"topic": "billing"})
            await tx.private_metadata.merge({"cursor": "c1"})

        await input.thread.mutate(both)
        seen["run"] = await input.run.metadata.merge({"rating": "good"})
        page = await input.thread.messages.list(view="transcript")
        seen["transcript"] = [m.role for m in page.items]

    result = _send(alice)
    outcome = asyncio.run(
        _execute(result.run.id, {"prepare_run": prepare_run}, [ScriptedStep.reply("ok")])
    )
    assert outcome.status == "completed"
    thread = Thread.objects.get(id=result.run.thread_id)
    assert thread.metadata == {"topic": "billing"}
    assert thread.private_metadata == {"cursor": "c1"}
    note = Message.objects.get(thread=thread, role="system")
    assert (note.in_transcript, note.in_context, note.producer) == (False, True, "lifecycle")
    assert Run.objects.get(id=result.run.id).metadata == {"rating": "good"}
    assert seen["run"] == {"rating": "good"}
    assert seen["transcript"] == ["user"]
    assert seen["latest"].role == "user"


def test_lc_032_a_write_after_losing_the_lease_is_rejected_and_nothing_is_written(
    alice: Identity,
) -> None:
    """LC-032 (issue 3 acceptance): once another worker took the run over, every facade
    write of the old execution raises LeaseLost and writes nothing, mutate included."""
    outcomes: list[str] = []

    async def prepare_run(input: Any) -> None:
        # Another worker claims the run: the fencing token moves on.
        await sync_to_async(
            lambda: Run.objects.filter(id=input.run.run_id).update(lease_token=F("lease_token") + 1)
        )()
        attempts = {
            "append": lambda: input.thread.messages.append(
                role="assistant", parts=[{"type": "text", "text": "stale"}]
            ),
            "merge": lambda: input.thread.metadata.merge({"topic": "stale"}),
            "private": lambda: input.thread.private_metadata.replace({"cursor": "stale"}),
            # staged writes need no await inside mutate (sync hooks can stage too)
            "mutate": lambda: input.thread.mutate(
                lambda tx: (
                    tx.metadata.merge({"a": 1}),
                    tx.messages.append(role="user", parts=[{"type": "text", "text": "stale"}]),
                )
            ),
            "run": lambda: input.run.metadata.merge({"rating": "stale"}),
        }
        for name, attempt in attempts.items():
            try:
                await attempt()
            except LeaseLost:
                outcomes.append(name)
        raise LeaseLost(input.run.run_id)

    result = _send(alice)
    before = list(Message.objects.filter(thread_id=result.run.thread_id).values_list("id"))
    with pytest.raises(LeaseLost):
        asyncio.run(_execute(result.run.id, {"prepare_run": prepare_run}, []))
    assert outcomes == ["append", "merge", "private", "mutate", "run"]
    thread = Thread.objects.get(id=result.run.thread_id)
    assert thread.metadata == {} and thread.private_metadata == {}
    assert list(Message.objects.filter(thread=thread).values_list("id")) == before
    assert Run.objects.get(id=result.run.id).metadata == {}


def test_lc_038_mutate_with_a_stale_version_writes_nothing(alice: Identity) -> None:
    """LC-038, LC-036: a stale expected_version and a raising fn both leave no writes."""
    errors: list[str] = []

    async def prepare_run(input: Any) -> None:
        version = await sync_to_async(
            lambda: Thread.objects.get(id=input.thread.thread_id).version
        )()

        async def write(tx: Any) -> None:
            await tx.metadata.merge({"k": "v"})

        try:
            await input.thread.mutate(write, expected_version=version - 1)
        except MutationConflict:
            errors.append("conflict")

        async def failing(tx: Any) -> None:
            await tx.metadata.merge({"k": "v"})
            raise RuntimeError("changed my mind")

        try:
            await input.thread.mutate(failing)
        except RuntimeError:
            errors.append("raised")
        await input.thread.mutate(write, expected_version=version)

    result = _send(alice)
    asyncio.run(_execute(result.run.id, {"prepare_run": prepare_run}, [ScriptedStep.reply("ok")]))
    assert errors == ["conflict", "raised"]
    assert Thread.objects.get(id=result.run.thread_id).metadata == {"k": "v"}


def test_lc_004_the_facade_is_scoped_to_its_thread_and_partition(
    alice: Identity, bob: Identity
) -> None:
    """LC-004, LC-015: another thread's message id reads as unknown."""
    other = _send(bob, "bob's secret")
    other_id = Message.objects.filter(thread_id=other.run.thread_id).get().message_id
    found: list[Any] = []

    async def prepare_run(input: Any) -> None:
        found.append(await input.thread.messages.get(other_id))
        found.append(await input.thread.messages.get_many([other_id]))

    result = _send(alice)
    asyncio.run(_execute(result.run.id, {"prepare_run": prepare_run}, [ScriptedStep.reply("ok")]))
    assert found == [None, []]


def test_lc_043_lc_047_resolver_history_on_the_orm_store(alice: Identity) -> None:
    """LC-043, LC-044, LC-047: the resolver's default context is anchored at step start on
    the ORM store too; a message it appends is stored but not in this step's base."""
    model = ScriptedModel(steps=[ScriptedStep.reply("ok")])
    anchors: list[Any] = []

    async def resolve(input: Any, next: Any) -> Any:
        anchors.append(input.history.through)
        await input.thread.messages.append(
            role="user", parts=[{"type": "text", "text": "appended late"}]
        )
        return await next()

    async def run(run_id: str) -> Any:
        store = ORMThreadStore()
        agent = define_agent(
            "orm-lc", instructions="x", model=model, lifecycle={"resolve_model_context": resolve}
        )
        claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
        return await RunEngine(agent=agent, store=store).run_episode(claim)

    result = _send(alice, "first question")
    assert asyncio.run(run(result.run.id)).status == "completed"
    assert anchors[0].role == "user"
    [request] = model.requests
    assert "appended late" not in str(request.messages)
    assert "first question" in str(request.messages)
    assert Message.objects.filter(thread_id=result.run.thread_id, producer="lifecycle").count() == 1
