"""after_tool_result sources of answered pending actions on the ORM (LC-137, LC-138)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import RunEngine, ScriptedModel, ScriptedStep, ToolContext, define_agent, tool
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)


class Question(BaseModel):
    text: str = ""


ask = tool("ask", input=Question, description="Ask the person.")  # a client tool


@tool(input=Question, needs_approval=True)
def publish(args: Question) -> str:
    """Publish after approval."""
    return f"published {args.text}"


@tool(input=Question)
def reserve(args: Question, ctx: ToolContext) -> Any:
    """Fails on purpose."""
    return ctx.fail(f"no seats for {args.text}")


def _agent(seen: list[Any], first: ScriptedStep) -> Any:
    return define_agent(
        "orm-sources",
        instructions="x",
        model=ScriptedModel(steps=[first, ScriptedStep.reply("ok")]),
        tools=[ask, publish, reserve],
        lifecycle={"after_tool_result": seen.append},
    )


async def _execute(run_id: str, agent: Any) -> Any:
    store = ORMThreadStore()
    claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
    return await RunEngine(agent=agent, store=store).run_episode(claim)


def _waiting(identity: Identity, agent: Any) -> tuple[str, PendingAction]:
    thread = services.create_thread(identity)
    sent = services.send(
        identity, thread.id, {"parts": [{"type": "text", "text": "go"}]}, dispatch=False
    )
    assert sent.run is not None
    assert asyncio.run(_execute(sent.run.id, agent)).status == "waiting"
    return sent.run.id, PendingAction.objects.get(run_id=sent.run.id)


def _sources(seen: list[Any]) -> list[tuple[str, str]]:
    return [(i.result.source, i.result.status) for i in seen]


@pytest.mark.parametrize("by", ["client", "manual"])
def test_lc_138_client_and_manual_answers_keep_their_source(alice: Identity, by: str) -> None:
    """LC-137, LC-138: a client tool answered by the client (submit_action) or by trusted
    code (fulfil_action) reaches after_tool_result as client / manual when the run resumes."""
    seen: list[Any] = []
    agent = _agent(seen, ScriptedStep.call("ask", {"text": "color?"}, id="a1"))
    run_id, action = _waiting(alice, agent)
    assert seen == []  # LC-140: nothing final while the call waits
    if by == "client":
        services.submit_action(alice, action.id, {"output": "blue"}, dispatch=False)
    else:
        services.fulfil_action(action.id, {"output": "blue"}, by="desk", dispatch=False)
    assert asyncio.run(_execute(run_id, agent)).status == "completed"
    assert _sources(seen) == [(by, "output-available")]
    assert seen[0].result.output == "blue"


def test_lc_138_an_approved_call_resumes_as_source_resume(alice: Identity) -> None:
    """LC-138, LC-133: the approved call runs in the resume episode: source resume, entry
    resume."""
    seen: list[Any] = []
    agent = _agent(seen, ScriptedStep.call("publish", {"text": "post"}, id="p1"))
    run_id, action = _waiting(alice, agent)
    services.submit_action(alice, action.id, {"approved": True}, dispatch=False)
    assert asyncio.run(_execute(run_id, agent)).status == "completed"
    assert _sources(seen) == [("resume", "output-available")]
    assert seen[0].entry.type == "resume"


def test_lc_139_ctx_fail_is_stored_with_source_fail(alice: Identity) -> None:
    """LC-139: a returned ctx.fail(...) is an output-error with source fail, stored so."""
    seen: list[Any] = []
    agent = _agent(seen, ScriptedStep.call("reserve", {"text": "Friday"}, id="r1"))
    thread = services.create_thread(alice)
    sent = services.send(
        alice, thread.id, {"parts": [{"type": "text", "text": "go"}]}, dispatch=False
    )
    assert sent.run is not None
    assert asyncio.run(_execute(sent.run.id, agent)).status == "completed"
    assert _sources(seen) == [("fail", "output-error")]
    step = Message.objects.get(run_id=sent.run.id, step_index=0)
    [part] = [p for p in step.parts if p.get("toolCallId") == "r1"]
    assert part["errorText"] == "no seats for Friday"
    assert part["toolMetadata"] == {"pai": {"source": "fail"}}
