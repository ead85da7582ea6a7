"""``suspend_history`` on the tool hooks, in the engine on the in-memory store (LC-132, LC-133).

The ORM twin is tests/integration/test_lifecycle_suspend_history.py.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pydantic import BaseModel

from pai_agents import ScriptedStep, tool
from pai_agents.engine.memory import InMemoryThreadStore
from pai_agents.engine.store import Lease
from pai_agents.engine.suspensions import SuspensionHistoryStore
from pai_agents.lifecycle import AgentLifecycle, SuspensionEpisode
from pai_agents.models.scripted import ScriptedToolCall
from tests.support.engine_harness import executed, harness


class Recorder(AgentLifecycle):
    def __init__(self) -> None:
        self.before: list[Any] = []
        self.after: list[Any] = []

    def before_tool_call(self, input: Any) -> Any:
        self.before.append(input)

    def after_tool_result(self, input: Any) -> Any:
        self.after.append(input)


class CountingStore(InMemoryThreadStore):
    """Counts suspend_history reads: the hot path must not make any."""

    def __init__(self) -> None:
        super().__init__()
        self.history_reads: list[set[str]] = []

    async def suspend_history(
        self, lease: Lease, *, tool_call_ids: Collection[str]
    ) -> dict[str, list[SuspensionEpisode]]:
        self.history_reads.append(set(tool_call_ids))
        return await super().suspend_history(lease, tool_call_ids=tool_call_ids)


def _counting(h: Any) -> CountingStore:
    """Move the harness's rows into a CountingStore (same threads, runs and messages)."""
    store = CountingStore()
    store.__dict__.update({k: v for k, v in h.store.__dict__.items() if k != "_lock"})
    h.store = store
    return store


class Pick(BaseModel):
    color: str = ""


picker = tool("picker", input=Pick, output=Pick)  # a client tool: no execute


async def test_lc_133_initial_entry_has_an_empty_history() -> None:
    """LC-132, LC-133: a first dispatch has entry ``initial`` and an empty
    ``suspend_history``, and the store is not asked for one."""
    rec = Recorder()
    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}, id="c1"), ScriptedStep.reply("ok")],
        parts=[rec],
    )
    store = _counting(h)
    assert (await h.run()).status == "completed"
    [before], [after] = rec.before, rec.after
    assert (before.entry.type, tuple(before.suspend_history)) == ("initial", ())
    assert (after.entry.type, tuple(after.suspend_history)) == ("initial", ())
    assert store.history_reads == []


async def test_lc_133_an_approved_call_resumes_with_its_suspension_episode() -> None:
    """LC-132, LC-133: on resume both tool hooks get the approval episode: kind, the payload
    the person saw, the submitted resolution and when; the entry references the action."""
    rec = Recorder()
    h = harness(
        [ScriptedStep.call("wire", {"q": "1"}, id="w1"), ScriptedStep.reply("done")],
        parts=[rec],
    )
    store = _counting(h)
    assert (await h.run()).status == "waiting"
    assert [tuple(b.suspend_history) for b in rec.before] == [()]  # routed: no history yet
    assert store.history_reads == []
    store.respond(h.run_id, "w1", approved=True, reason="fine by me")
    assert (await h.run()).status == "completed"

    resumed, [after] = rec.before[1], rec.after
    [episode] = resumed.suspend_history
    assert isinstance(episode, SuspensionEpisode)
    assert (episode.kind, episode.status) == ("approval", "submitted")
    assert episode.payload == {"q": "1"}
    assert episode.resolution == {"approved": True, "reason": "fine by me"}
    assert episode.approval_id and episode.approval_id.startswith("apr")
    assert episode.suspended_at and episode.resolved_at
    assert episode.suspended_at <= episode.resolved_at
    assert resumed.entry.type == "resume" and resumed.entry.action["id"] == episode.action_id
    assert tuple(after.suspend_history) == (episode,)
    assert after.entry.type == "resume" and after.result.source == "resume"
    assert executed == [("wire", "1")]
    assert store.history_reads == [{"w1"}]  # one read for the resume episode


async def test_lc_133_a_client_result_resumes_with_its_client_episode() -> None:
    """LC-133, LC-137: a submitted client result reaches after_tool_result as a resume of
    its suspended call, with the client episode (payload, resolution) in its history."""
    rec = Recorder()
    h = harness(
        [ScriptedStep.call("picker", {"color": "?"}, id="p1"), ScriptedStep.reply("thanks")],
        parts=[rec],
        tools=[picker],
    )
    assert (await h.run()).status == "waiting"
    h.store.submit_result(h.run_id, "p1", output={"color": "red"})
    assert (await h.run()).status == "completed"

    [after] = rec.after
    assert after.result.source == "client" and after.result.output == {"color": "red"}
    [episode] = after.suspend_history
    assert (episode.kind, episode.payload) == ("client", {"color": "?"})
    assert episode.resolution == {"output": {"color": "red"}}
    assert after.entry.type == "resume" and after.entry.name == "picker"
    assert after.entry.resume == {"output": {"color": "red"}}
    assert after.entry.action == {"kind": "client", "toolCallId": "p1", "id": episode.action_id}


async def test_lc_133_history_is_per_call_and_loaded_once() -> None:
    """LC-133: two approvals of one step resume together: one store read, and each call
    sees only its own episode."""
    rec = Recorder()
    both = ScriptedStep(
        tool_calls=[
            ScriptedToolCall(name="wire", input={"q": "a"}, id="w1"),
            ScriptedToolCall(name="wire", input={"q": "b"}, id="w2"),
        ]
    )
    h = harness([both, ScriptedStep.reply("done")], parts=[rec])
    store = _counting(h)
    assert (await h.run()).status == "waiting"
    store.respond(h.run_id, "w1", approved=True)
    store.respond(h.run_id, "w2", approved=True)
    assert (await h.run()).status == "completed"
    seen = {a.call.tool_call_id: [e.payload for e in a.suspend_history] for a in rec.after}
    assert seen == {"w1": [{"q": "a"}], "w2": [{"q": "b"}]}
    assert store.history_reads == [{"w1", "w2"}]


async def test_lc_133_no_tool_hook_no_history_read() -> None:
    """The hot path stays lean: an agent whose lifecycle has no tool hook never reads the
    suspension history, not even on resume."""
    h = harness(
        [ScriptedStep.call("wire", {"q": "1"}, id="w1"), ScriptedStep.reply("done")],
        parts=[{"after_step": lambda i: None}],
    )
    store = _counting(h)
    assert (await h.run()).status == "waiting"
    store.respond(h.run_id, "w1", approved=True)
    assert (await h.run()).status == "completed"
    assert store.history_reads == []


async def test_lc_133_a_store_without_history_gives_empty_histories() -> None:
    """A ThreadStore that does not implement suspend_history still resumes; hooks get ()."""

    class Plain(InMemoryThreadStore):
        suspend_history = None  # type: ignore[assignment]

    rec = Recorder()
    h = harness(
        [ScriptedStep.call("wire", {"q": "1"}, id="w1"), ScriptedStep.reply("done")],
        parts=[rec],
    )
    plain = Plain()
    plain.__dict__.update({k: v for k, v in h.store.__dict__.items() if k != "_lock"})
    h.store = plain
    assert not isinstance(plain, SuspensionHistoryStore)
    assert (await h.run()).status == "waiting"
    plain.respond(h.run_id, "w1", approved=True)
    assert (await h.run()).status == "completed"
    assert tuple(rec.after[0].suspend_history) == ()
    assert rec.after[0].entry.type == "resume"
