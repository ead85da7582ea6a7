"""LC-137 for a run cancelled while it waits on an approval or a client tool: each settled
call's ``cancel`` result passes ``after_tool_result`` exactly once before any model sees it,
and what live clients fold from the stream equals the stored message (the hook's text
included). The suite runs it on SQLite and on PostgreSQL (``DATABASE_URL``): the ORM
store, real claims and fenced writes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import (
    RunEngine,
    ScriptedModel,
    ScriptedStep,
    ScriptedToolCall,
    define_agent,
    tool,
)
from pai_agents.engine.events import RecordingSink
from pai_agents.engine.rewrites import dispatcher
from pai_agents.lifecycle import ReplaceMessage
from pai_agents.messages.reducer import MessageReducer
from pai_threads import services
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Run
from pai_threads.services import cancelling
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)


class Args(BaseModel):
    q: str = ""


@tool(input=Args, needs_approval=True)
def wire(args: Args) -> str:
    """Needs a person."""
    return "sent"


ask = tool("ask", input=Args, description="The client answers.")


def _agent(seen: list[Any], finished: list[Any]) -> Any:
    async def after_tool_result(i: Any) -> Any:
        seen.append(i)
        return ReplaceMessage(message=f"cancelled by the user ({i.tool.name})")

    model = ScriptedModel(
        steps=[
            ScriptedStep(
                text="Two things first.",
                tool_calls=[
                    ScriptedToolCall(name="wire", input={"q": "x"}),
                    ScriptedToolCall(name="ask", input={"q": "y"}),
                ],
            )
        ]
    )
    return define_agent(
        "lc137",
        instructions="x",
        model=model,
        tools=[wire, ask],
        lifecycle={"after_tool_result": after_tool_result, "run_finished": finished.append},
    )


def _waiting_run(alice: Identity, monkeypatch: pytest.MonkeyPatch, agent: Any) -> Run:
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)
    thread = services.create_thread(alice, agent="lc137")
    message = {"role": "user", "parts": [{"type": "text", "text": "hi"}]}
    sent = services.send(alice, thread.id, message, dispatch=False)
    assert sent.run is not None

    async def execute() -> Any:
        store = ORMThreadStore()
        claim = await store.claim_run(sent.run.id, owner="w1", lease_seconds=30)
        return await RunEngine(agent=agent, store=store).run_episode(claim)

    assert asyncio.run(execute()).status == "waiting"
    assert PendingAction.objects.filter(run_id=sent.run.id, status="pending").count() == 2
    return sent.run


def _check(run: Run, seen: list[Any], finished: list[Any]) -> Message:
    assert Run.objects.get(id=run.id).status == "cancelled"
    assert PendingAction.objects.filter(run_id=run.id, status="pending").count() == 0
    # Exactly once per settled call, as a cancel.
    assert sorted(i.tool.name for i in seen) == ["ask", "wire"]
    assert {(i.result.source, i.result.status) for i in seen} == {("cancel", "output-error")}
    row = Message.objects.get(run_id=run.id, role="assistant")
    tools = [p for p in row.parts if p.get("toolCallId")]
    assert sorted(p["errorText"] for p in tools) == [
        "cancelled by the user (ask)",
        "cancelled by the user (wire)",
    ]
    assert {p["state"] for p in tools} == {"output-error"}
    assert dispatcher().wait_idle(timeout=30)
    [done] = [f for f in finished if f.run_id == run.id]
    assert (done.status, done.run_status, done.continuation) == ("aborted", "cancelled", True)
    return row


def test_lc_137_cancel_of_a_waiting_run_passes_after_tool_result_once(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LC-137: cancelling settles the approval and the client-tool call through the hook,
    once each; the stream a live client folds onto the waiting message equals the stored
    message."""
    seen: list[Any] = []
    finished: list[Any] = []
    agent = _agent(seen, finished)
    run = _waiting_run(alice, monkeypatch, agent)
    waiting = Message.objects.get(run_id=run.id, role="assistant")
    dispatched: list[str] = []
    monkeypatch.setattr(cancelling, "dispatch_after_commit", dispatched.append)

    cancelled = services.cancel_run(alice, run.id)
    assert (cancelled.status, dispatched) == ("queued", [run.id])  # its episode settles it
    assert seen == []
    # A second cancel while that episode is pending changes nothing.
    assert services.cancel_run(alice, run.id).status == "queued"
    assert dispatched == [run.id]

    sink = RecordingSink()

    async def execute() -> Any:
        store = ORMThreadStore()
        claim = await store.claim_run(run.id, owner="w2", lease_seconds=30)
        return await RunEngine(agent=agent, store=store, sink=sink).run_episode(claim)

    assert asyncio.run(execute()).status == "cancelled"
    row = _check(run, seen, finished)
    # Live equals stored: a client folds the continuation onto the message it had.
    [started] = [e for e in sink.events if e["type"] == "generation.started"]
    assert started.get("continued") is True and started["messageId"] == row.message_id
    reducer = MessageReducer(
        {"id": waiting.message_id, "role": "assistant", "parts": waiting.parts}
    )
    for chunk in sink.chunks(row.message_id):
        reducer.apply(chunk)
    assert reducer.message["parts"] == row.parts
    [end] = [e for e in sink.events if e["type"] == "generation.finished"]
    assert end["message"]["parts"] == row.parts


def test_lc_137_through_the_executor(
    alice: Identity, monkeypatch: pytest.MonkeyPatch, wait_for_run: Any
) -> None:
    """The same through the configured executor (the cancel dispatches the episode); input
    queued behind the waiting run is admitted once the episode has ended it."""
    seen: list[Any] = []
    finished: list[Any] = []
    run = _waiting_run(alice, monkeypatch, _agent(seen, finished))
    later = {"id": "later", "role": "user", "parts": [{"type": "text", "text": "next"}]}
    queued = services.send(alice, run.thread_id, later, dispatch=False).queue_item
    assert queued is not None
    services.cancel_run(alice, run.id)
    assert wait_for_run(run.id).status == "cancelled"
    _check(run, seen, finished)
    queued.refresh_from_db()
    assert queued.status == "admitted" and queued.run_id != run.id
    wait_for_run(str(queued.run_id))
