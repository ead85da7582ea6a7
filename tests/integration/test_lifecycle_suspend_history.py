"""``suspend_history`` on the tool hooks with the ORM store (LC-132, LC-133).

An approval and a client tool suspend as pending-action rows; answering them and resuming the
run gives both tool hooks the call's episode, read from those rows once, on resume only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import RunEngine, ScriptedModel, ScriptedStep, define_agent, tool
from pai_agents.engine.store import Lease
from pai_agents.lifecycle import AgentLifecycle, SuspensionEpisode
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import PendingAction
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)


class Order(BaseModel):
    item: str = ""


@tool(input=Order, needs_approval=True)
def buy(args: Order) -> str:
    """Buy after a person approves."""
    return f"bought {args.item}"


pick = tool("pick", input=Order, description="The client picks.")  # no execute


class Recorder(AgentLifecycle):
    def __init__(self) -> None:
        self.before: list[Any] = []
        self.after: list[Any] = []

    def before_tool_call(self, input: Any) -> Any:
        self.before.append(input)

    def after_tool_result(self, input: Any) -> Any:
        self.after.append(input)


class CountingStore(ORMThreadStore):
    reads: list[set[str]] = []

    def suspend_history_sync(
        self, lease: Lease, *, tool_call_ids: Collection[str]
    ) -> dict[str, list[SuspensionEpisode]]:
        type(self).reads.append(set(tool_call_ids))
        return super().suspend_history_sync(lease, tool_call_ids=tool_call_ids)


def _agent(rec: Recorder, first: ScriptedStep) -> Any:
    return define_agent(
        "orm-suspend-history",
        instructions="x",
        model=ScriptedModel(steps=[first, ScriptedStep.reply("ok")]),
        tools=[buy, pick],
        lifecycle=rec,
    )


def _execute(run_id: str, agent: Any) -> str:
    async def go() -> str:
        store = CountingStore()
        claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
        return (await RunEngine(agent=agent, store=store).run_episode(claim)).status

    return asyncio.run(go())


def _waiting(identity: Identity, agent: Any) -> tuple[str, PendingAction]:
    CountingStore.reads = []
    thread = services.create_thread(identity)
    sent = services.send(
        identity, thread.id, {"parts": [{"type": "text", "text": "go"}]}, dispatch=False
    )
    assert sent.run is not None
    assert _execute(sent.run.id, agent) == "waiting"
    return sent.run.id, PendingAction.objects.get(run_id=sent.run.id)


def _iso(moment: Any) -> str:
    return str(moment.isoformat().replace("+00:00", "Z"))


def test_lc_133_approval_resume_carries_the_episode_from_its_row(alice: Identity) -> None:
    """LC-132, LC-133: approve -> resume on the ORM: before_tool_call and after_tool_result
    get the approval episode (payload, resolution, times) of the pending-action row, and the
    resume entry references that row; the initial dispatch had an empty history."""
    rec = Recorder()
    agent = _agent(rec, ScriptedStep.call("buy", {"item": "tea"}, id="b1"))
    run_id, action = _waiting(alice, agent)
    [initial] = rec.before
    assert (initial.entry.type, tuple(initial.suspend_history)) == ("initial", ())
    assert CountingStore.reads == []  # nothing read on the initial dispatch

    services.submit_action(alice, action.id, {"approved": True, "reason": "ok"}, dispatch=False)
    assert _execute(run_id, agent) == "completed"

    action.refresh_from_db()
    expected = SuspensionEpisode(
        action_id=action.id,
        kind="approval",
        status="submitted",
        payload={"item": "tea"},
        resolution={"approved": True, "reason": "ok"},
        approval_id=action.request["approvalId"],
        suspended_at=_iso(action.created_at),
        resolved_at=_iso(action.resolved_at),
    )
    resumed, [after] = rec.before[1], rec.after
    assert tuple(resumed.suspend_history) == (expected,)
    assert tuple(after.suspend_history) == (expected,)
    assert resumed.entry.type == after.entry.type == "resume"
    assert resumed.entry.action == {"kind": "approval", "toolCallId": "b1", "id": action.id}
    assert after.result.output == "bought tea"
    assert CountingStore.reads == [{"b1"}]  # one read, on resume


def test_lc_133_a_fulfilled_client_tool_resumes_with_its_client_episode(
    alice: Identity,
) -> None:
    """LC-133, LC-137: a client tool fulfilled by trusted code reaches after_tool_result
    as a resume of its call, with the client episode and the submitted output."""
    rec = Recorder()
    agent = _agent(rec, ScriptedStep.call("pick", {"item": "?"}, id="p1"))
    run_id, action = _waiting(alice, agent)
    services.fulfil_action(action.id, {"output": {"item": "tea"}}, by="desk", dispatch=False)
    assert _execute(run_id, agent) == "completed"

    [after] = rec.after
    assert after.result.source == "manual"
    [episode] = after.suspend_history
    assert (episode.kind, episode.status, episode.action_id) == ("client", "submitted", action.id)
    assert episode.payload == {"item": "?"}
    assert episode.resolution == {"output": {"item": "tea"}}
    assert after.entry.type == "resume" and after.entry.resume == {"output": {"item": "tea"}}
