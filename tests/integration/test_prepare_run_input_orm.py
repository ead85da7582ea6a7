"""LC-069 on the ORM store: prepare_run's ``input`` for a send and a trigger."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pai_agents import RunEngine, ScriptedModel, ScriptedStep, define_agent
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)


def test_lc_069_prepare_run_input_names_the_operation(alice: Identity) -> None:
    """LC-069: a send's input carries its user message; a trigger's none (it was None)."""
    seen: list[Any] = []

    async def run(run_id: str) -> Any:
        store = ORMThreadStore()
        agent = define_agent(
            "orm-input",
            instructions="x",
            model=ScriptedModel(steps=[ScriptedStep.reply("ok")]),
            lifecycle={"prepare_run": lambda i: seen.append(i.input)},
        )
        claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
        return await RunEngine(agent=agent, store=store).run_episode(claim)

    thread = services.create_thread(alice)
    message = {"role": "user", "parts": [{"type": "text", "text": "hi"}]}
    sent = services.send(alice, thread.id, message, dispatch=False)
    assert sent.run is not None
    assert asyncio.run(run(sent.run.id)).status == "completed"
    triggered = services.trigger(alice, thread.id, dispatch=False)
    assert asyncio.run(run(triggered.id)).status == "completed"

    first, second = seen
    assert first.operation == "send" and first.message is not None
    assert sent.message is not None and first.message.id == sent.message.message_id
    assert second.operation == "trigger" and second.message is None and second.answers == ()
