"""TH-041 for runs cancelled while no worker executes them: run_finished fires, after the
cancel committed, for a cancelled queued run and a cancelled waiting run (it did not)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import RunEngine, ScriptedModel, ScriptedStep, ScriptedToolCall, define_agent, tool
from pai_agents.engine.rewrites import dispatcher
from pai_threads import services
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Run
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)


class Args(BaseModel):
    q: str = ""


@tool(input=Args, needs_approval=True)
def wire(args: Args) -> str:
    """Needs a person."""
    return "sent"


def _agent(finished: list[Any], model: ScriptedModel) -> Any:
    return define_agent(
        "th041",
        instructions="x",
        model=model,
        tools=[wire],
        lifecycle={"run_finished": lambda i: finished.append(i)},
    )


def _register(monkeypatch: pytest.MonkeyPatch, agent: Any) -> None:
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)


def _send(identity: Identity) -> Run:
    thread = services.create_thread(identity, agent="th041")
    message = {"role": "user", "parts": [{"type": "text", "text": "hi"}]}
    sent = services.send(identity, thread.id, message, dispatch=False)
    assert sent.run is not None
    return sent.run


def test_th_041_run_finished_fires_for_a_cancelled_queued_run(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TH-041: a queued run cancelled before any worker claimed it is observed as aborted."""
    finished: list[Any] = []
    _register(monkeypatch, _agent(finished, ScriptedModel(steps=[])))
    run = _send(alice)
    assert services.cancel_run(alice, run.id).status == "cancelled"
    assert dispatcher().wait_idle(timeout=30)
    [done] = finished
    assert (done.run_id, done.status, done.run_status) == (run.id, "aborted", "cancelled")
    assert done.message is None and done.continuation is False


def test_th_041_run_finished_fires_for_a_cancelled_waiting_run(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TH-041: a run waiting for an approval, then cancelled, is observed as aborted with
    its settled message (the tool call cancelled) and as a continuation."""
    finished: list[Any] = []
    model = ScriptedModel(
        steps=[ScriptedStep(tool_calls=[ScriptedToolCall(name="wire", input={"q": "x"})])]
    )
    agent = _agent(finished, model)
    _register(monkeypatch, agent)
    run = _send(alice)

    async def execute() -> Any:
        store = ORMThreadStore()
        claim = await store.claim_run(run.id, owner="w1", lease_seconds=30)
        return await RunEngine(agent=agent, store=store).run_episode(claim)

    assert asyncio.run(execute()).status == "waiting"
    assert finished == []  # waiting is not an end
    assert services.cancel_run(alice, run.id).status == "cancelled"
    assert dispatcher().wait_idle(timeout=30)
    [done] = finished
    assert (done.status, done.run_status, done.continuation) == ("aborted", "cancelled", True)
    [part] = [p for p in done.message["parts"] if p.get("toolCallId")]
    assert part["state"] == "output-error"
