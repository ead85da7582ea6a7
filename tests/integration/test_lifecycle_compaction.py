"""The built-in context compactor on the ORM store: real rows, real lease fencing (LC-053..056)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.db.models import F

from pai_agents import RunEngine, ScriptedModel, ScriptedStep, define_agent
from pai_agents.engine.store import LeaseLost
from pai_agents.lifecycle import SummarizeInput, context_compaction
from pai_threads import services
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Thread
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "pai_compaction"
AGENT = "orm-compaction"
CLEARED: dict[str, Any] = {"summary": None, "cursor": None, "boundaries": [], "usage": None}


class Summaries:
    """A summarizer recording its calls; ``during`` runs inside the call (the in-flight
    window of LC-056)."""

    def __init__(self) -> None:
        self.calls: list[SummarizeInput] = []
        self.during: Any = None

    def __call__(self, input: SummarizeInput) -> str:
        self.calls.append(input)
        if self.during is not None:
            self.during()
        return "S(" + ",".join(m.id for m in input.messages) + ")"


@pytest.fixture
def summaries(monkeypatch: pytest.MonkeyPatch) -> Summaries:
    """A registered agent whose lifecycle is the compactor (regenerate looks it up)."""
    recorder = Summaries()
    agent = _agent(recorder, ScriptedModel(steps=[]))
    agents = {**registry.agents(), AGENT: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)
    return recorder


def _agent(summarize: Summaries, model: ScriptedModel) -> Any:
    return define_agent(
        AGENT,
        instructions="x",
        model=model,
        lifecycle=context_compaction(
            summarize,
            threshold_tokens=50,
            keep_recent=2,
            count_tokens=lambda messages: 10 * len(messages),
        ),
    )


def _conversation(identity: Identity, turns: int = 6) -> tuple[Thread, str]:
    """``turns`` stored messages h0.. then a sent user message; returns (thread, run id)."""
    thread = services.create_thread(identity, agent=AGENT)
    for index in range(turns):
        role = "user" if index % 2 == 0 else "assistant"
        Message.objects.create(
            message_id=f"h{index}",
            thread=thread,
            scope_key=thread.scope_key,
            role=role,
            parts=[{"type": "text", "text": f"turn {index}"}],
            producer=Message.Producer.SEND if role == "user" else Message.Producer.MODEL,
        )
    result = services.send(
        identity,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": "hello"}]},
        dispatch=False,
    )
    assert result.run is not None
    return thread, result.run.id


async def _execute(run_id: str, summarize: Summaries, model: ScriptedModel) -> Any:
    store = ORMThreadStore()
    agent = _agent(summarize, model)
    claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
    return await RunEngine(agent=agent, store=store).run_episode(claim)


def _first_texts(model: ScriptedModel) -> list[str]:
    return [
        str(m["content"]) if isinstance(m["content"], str) else m["content"][0]["text"]
        for m in model.requests[0].messages
    ]


def test_lc_053_th_005_the_summary_and_cursor_commit_to_thread_private_metadata(
    alice: Identity, summaries: Summaries
) -> None:
    """LC-053, TH-005: the compactor commits summary, cursor and boundary in thread private
    metadata (never public), and the model gets the summary plus the recent messages."""
    thread, run_id = _conversation(alice)
    model = ScriptedModel(steps=[ScriptedStep.reply("ok")])
    assert asyncio.run(_execute(run_id, summaries, model)).status == "completed"
    (call,) = summaries.calls
    assert [m.id for m in call.messages] == ["h0", "h1", "h2", "h3", "h4"]
    stored = Thread.objects.get(id=thread.id)
    state = stored.private_metadata[KEY]
    assert state["summary"] == "S(h0,h1,h2,h3,h4)" and state["cursor"] == "h4"
    assert state["boundaries"] == [{"cursor": "h4", "folded": 5, "tokens": 50}]
    answer = Message.objects.get(thread=thread, role="assistant", run_id=run_id)
    assert state["usage"]["message_id"] == answer.message_id  # the usage anchor
    assert stored.metadata == {}  # nothing public
    texts = _first_texts(model)
    assert texts[0].endswith("S(h0,h1,h2,h3,h4)")
    assert texts[1:] == ["turn 5", "hello"]


def test_lc_056_a_summary_finished_after_lease_loss_writes_nothing(
    alice: Identity, summaries: Summaries
) -> None:
    """LC-056: another worker claimed the run while the summary was in flight: the commit
    is fenced (LeaseLost), the thread's private metadata is untouched, no model call."""
    thread, run_id = _conversation(alice)
    summaries.during = lambda: Run.objects.filter(id=run_id).update(
        lease_token=F("lease_token") + 1
    )
    version = Thread.objects.get(id=thread.id).version
    model = ScriptedModel(steps=[ScriptedStep.reply("ok")])
    with pytest.raises(LeaseLost):
        asyncio.run(_execute(run_id, summaries, model))
    stored = Thread.objects.get(id=thread.id)
    assert stored.private_metadata == {} and stored.version == version
    assert model.requests == []
    assert not Message.objects.filter(thread=thread, run_id=run_id, role="assistant").exists()


def test_lc_056_a_summary_whose_cursor_changed_meanwhile_is_rejected(
    alice: Identity, summaries: Summaries
) -> None:
    """LC-056: the compactor's state changed under it (here a trusted write): its commit is
    rejected, the other state stands, and the step uses that stored state."""
    thread, run_id = _conversation(alice)
    theirs = {**CLEARED, "summary": "theirs", "cursor": "h2"}
    summaries.during = lambda: Thread.objects.filter(id=thread.id).update(
        private_metadata={KEY: theirs}
    )
    model = ScriptedModel(steps=[ScriptedStep.reply("ok")])
    assert asyncio.run(_execute(run_id, summaries, model)).status == "completed"
    assert len(summaries.calls) == 1
    state = Thread.objects.get(id=thread.id).private_metadata[KEY]
    assert (state["summary"], state["cursor"], state["boundaries"]) == ("theirs", "h2", [])
    texts = _first_texts(model)
    assert texts[0].endswith("theirs")
    assert texts[1:] == ["turn 3", "turn 4", "turn 5", "hello"]


def test_lc_055_regenerate_clears_the_boundary_stack_and_usage_anchor(
    alice: Identity, summaries: Summaries
) -> None:
    """LC-055: after a compaction, regenerating the answer (a context-eligibility change)
    clears summary, cursor, boundary stack and usage anchor in the rewrite's transaction."""
    thread, run_id = _conversation(alice)
    model = ScriptedModel(steps=[ScriptedStep.reply("ok")])
    asyncio.run(_execute(run_id, summaries, model))
    before = Thread.objects.get(id=thread.id).private_metadata[KEY]
    assert before["cursor"] == "h4" and before["usage"] is not None
    services.regenerate(alice, thread.id, dispatch=False)
    assert Thread.objects.get(id=thread.id).private_metadata == {KEY: CLEARED}
