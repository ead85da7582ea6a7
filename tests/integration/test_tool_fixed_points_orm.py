"""MF-046 on the ORM store: a tool output that is not a fixed point of its schema is not
stored as the call's output; the call ends as an error the model sees."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pai_agents import RunEngine, ScriptedModel, ScriptedStep, ScriptedToolCall, define_agent
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message
from pai_threads.store.thread_store import ORMThreadStore
from tests.unit.engine.test_tool_fixed_points import drifting_output

pytestmark = pytest.mark.django_db(transaction=True)


def test_mf_046_a_drifting_tool_output_is_not_stored(alice: Identity) -> None:
    """MF-046: the stored tool part is an output-error, never the unstable output."""
    call = ScriptedToolCall(name="drifting_output", input={"q": "x"})
    model = ScriptedModel(steps=[ScriptedStep(tool_calls=[call]), ScriptedStep.reply("ok")])
    agent = define_agent("mf046-orm", instructions="x", model=model, tools=[drifting_output])

    async def run(run_id: str) -> Any:
        store = ORMThreadStore()
        claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
        return await RunEngine(agent=agent, store=store).run_episode(claim)

    thread = services.create_thread(alice)
    message = {"role": "user", "parts": [{"type": "text", "text": "go"}]}
    sent = services.send(alice, thread.id, message, dispatch=False)
    assert sent.run is not None
    assert asyncio.run(run(sent.run.id)).status == "completed"
    parts = [
        p
        for row in Message.objects.filter(thread_id=thread.id).order_by("id")
        for p in row.parts
        if p.get("toolCallId")
    ]
    [part] = parts
    assert part["state"] == "output-error" and "output" not in part
