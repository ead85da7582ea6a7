"""LC-047 on the ORM store when the step-start anchor is hidden from context."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pai_agents import RunEngine, ScriptedModel, ScriptedStep, define_agent
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)


def test_lc_047_resolver_append_after_a_hidden_anchor_stays_out_of_the_step(
    alice: Identity,
) -> None:
    """LC-047: the newest message at step start is transcript-only (appended by
    prepare_run); a message the resolver appends is stored but not in this step's context."""
    model = ScriptedModel(steps=[ScriptedStep.reply("ok")])

    async def prepare_run(input: Any) -> None:
        await input.thread.messages.append(
            role="assistant",
            parts=[{"type": "text", "text": "shown to people only"}],
            visibility={"context": False},
        )

    async def resolve(input: Any, next: Any) -> Any:
        await input.thread.messages.append(
            role="user", parts=[{"type": "text", "text": "appended late"}]
        )
        return await next()

    async def run(run_id: str) -> Any:
        store = ORMThreadStore()
        agent = define_agent(
            "orm-lc",
            instructions="x",
            model=model,
            lifecycle={"prepare_run": prepare_run, "resolve_model_context": resolve},
        )
        claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
        return await RunEngine(agent=agent, store=store).run_episode(claim)

    thread = services.create_thread(alice)
    sent = services.send(
        alice,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": "first question"}]},
        dispatch=False,
    )
    assert sent.run is not None
    assert asyncio.run(run(sent.run.id)).status == "completed"
    [request] = model.requests
    assert "first question" in str(request.messages)
    assert "appended late" not in str(request.messages)
    assert "shown to people only" not in str(request.messages)
    assert Message.objects.filter(thread_id=thread.id, producer="lifecycle").count() == 2
