"""Message invariants on the in-memory store (the executable protocol description):
the one open message (MF-043), per-step usage and diagnostics (MF-002, MF-004) and the
persisted part grammar (MF-045). The ORM twins: tests/integration/test_message_invariants.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import (
    InMemoryThreadStore,
    RecordingSink,
    RunEngine,
    ScriptedModel,
    ScriptedStep,
    define_agent,
    tool,
)
from pai_agents.engine.memory import MemoryMessage
from pai_agents.engine.store import ClaimedRun, OpenMessageConflict, StepRecord
from pai_agents.messages.parts import UnknownPartType, check_part_types

pytestmark = pytest.mark.filterwarnings("error")

LEGACY_PARTS: tuple[dict[str, Any], ...] = (
    {"type": "tool-invocation", "toolInvocation": {"toolName": "x", "state": "call"}},
    {"type": "tool-call", "toolCallId": "c", "toolName": "x", "args": {}},
    {"type": "pai-text", "text": "x"},
    {"type": "unknown-kind"},
    {"type": "data-"},
    {"text": "no type"},
)


class Q(BaseModel):
    q: str


@tool(input=Q)
def lookup(args: Q) -> dict[str, Any]:
    """Look something up."""
    return {"q": args.q}


async def _claimed(store: InMemoryThreadStore) -> tuple[ClaimedRun, str]:
    thread_id = store.create_thread(scope_key="s", agent_name="t")
    run_id = store.send(
        thread_id, {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    )
    return await store.claim_run(run_id, owner="w", lease_seconds=30), thread_id


def _assistant(message_id: str, text: str = "x") -> Any:
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": text}]}


def _step(index: int, **request: Any) -> StepRecord:
    now = datetime.now(UTC)
    return StepRecord(
        index=index,
        message_id="",
        request=request,
        usage={"inputTokens": 1},
        finish_reason="stop",
        started_at=now,
        finished_at=now,
    )


# --------------------------------------------------------------------------- MF-043


async def test_mf_043_a_second_open_message_in_the_thread_cannot_be_opened() -> None:
    """MF-043: while one message of the thread is open, opening another fails (typed) and
    stores nothing."""
    store = InMemoryThreadStore()
    claim, thread_id = await _claimed(store)
    store._append(
        MemoryMessage(
            message=_assistant("other"), thread_id=thread_id, run_id=None, position=0, status="open"
        )
    )
    with pytest.raises(OpenMessageConflict):
        await store.checkpoint_message(claim.lease, message=_assistant("a1"), step_index=0)
    assert [m["id"] for m in store.thread_messages(thread_id)] == ["u1", "other"]


async def test_mf_043_streaming_into_a_message_that_is_no_longer_the_tail_fails() -> None:
    """MF-043: once a message follows the open one, a checkpoint into it fails and leaves
    the stored parts as they were."""
    store = InMemoryThreadStore()
    claim, thread_id = await _claimed(store)
    await store.checkpoint_message(claim.lease, message=_assistant("a1", "one"), step_index=0)
    await store.checkpoint_message(claim.lease, message=_assistant("a1", "two"), step_index=0)
    store._append(
        MemoryMessage(
            message={"id": "s1", "role": "system", "parts": [{"type": "text", "text": "note"}]},
            thread_id=thread_id,
            run_id=None,
            position=0,
        )
    )
    with pytest.raises(OpenMessageConflict):
        await store.checkpoint_message(claim.lease, message=_assistant("a1", "three"), step_index=0)
    (open_row,) = [m for m in store.messages if m.status == "open"]
    assert open_row.message["parts"] == [{"type": "text", "text": "two"}]


async def test_mf_043_only_an_assistant_message_can_be_open() -> None:
    """MF-043: the open message is an assistant message; opening a user message fails."""
    store = InMemoryThreadStore()
    claim, thread_id = await _claimed(store)
    user = {"id": "x", "role": "user", "parts": [{"type": "text", "text": "x"}]}
    with pytest.raises(OpenMessageConflict):
        await store.checkpoint_message(claim.lease, message=user, step_index=0)
    assert len(store.thread_messages(thread_id)) == 1


async def test_mf_043_a_committed_step_message_cannot_be_reopened() -> None:
    """MF-043: streaming into a committed message (not open) fails."""
    store = InMemoryThreadStore()
    claim, _ = await _claimed(store)
    await store.commit_step(claim.lease, message=_assistant("a1"), step=_step(0))
    with pytest.raises(OpenMessageConflict):
        await store.checkpoint_message(claim.lease, message=_assistant("a1", "y"), step_index=0)


# --------------------------------------------------------------------------- MF-002 / MF-004


async def test_mf_002_mf_004_each_step_message_carries_its_own_usage_and_diagnostics() -> None:
    """MF-002, MF-004: every step message has ``metadata.pai.usage`` (that step's usage,
    not the run's sum) and ``metadata.pai.diagnostics`` (finish reason, provider, model);
    the user message has neither."""
    model = ScriptedModel(
        steps=[
            ScriptedStep.call("lookup", {"q": "x"}, usage={"inputTokens": 10, "outputTokens": 2}),
            ScriptedStep.reply("done", usage={"inputTokens": 20, "outputTokens": 5}),
        ]
    )
    agent = define_agent("t", instructions="x", model=model, tools=[lookup])
    store = InMemoryThreadStore()
    claim, thread_id = await _claimed(store)
    outcome = await RunEngine(agent=agent, store=store, sink=RecordingSink()).run_episode(claim)
    assert outcome.status == "completed"

    user, first, second = store.client_messages(thread_id)
    assert "usage" not in user["metadata"]["pai"] and "diagnostics" not in user["metadata"]["pai"]
    assert first["metadata"]["pai"]["usage"] == {"inputTokens": 10, "outputTokens": 2}
    assert second["metadata"]["pai"]["usage"] == {"inputTokens": 20, "outputTokens": 5}
    assert first["metadata"]["pai"]["diagnostics"]["finishReason"] == "tool-calls"
    assert second["metadata"]["pai"]["diagnostics"]["finishReason"] == "stop"
    for message in (first, second):
        diagnostics = message["metadata"]["pai"]["diagnostics"]
        assert (diagnostics["provider"], diagnostics["modelId"]) == (
            model.provider,
            model.model_id,
        )
        assert message["metadata"]["pai"]["producer"] == "model"
    # The run's total is the sum; no message carries it.
    assert outcome.usage["inputTokens"] == 30


# --------------------------------------------------------------------------- MF-045


@pytest.mark.parametrize("part", LEGACY_PARTS, ids=lambda p: str(p.get("type")))
async def test_mf_045_committing_a_step_rejects_unknown_part_types(part: dict[str, Any]) -> None:
    """MF-045: the store refuses a step message with a part outside the pinned grammar
    (legacy tool-invocation / tool-call shapes and PAI part names included)."""
    store = InMemoryThreadStore()
    claim, thread_id = await _claimed(store)
    message = {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "x"}, part]}
    with pytest.raises(UnknownPartType):
        await store.commit_step(claim.lease, message=message, step=_step(0))
    with pytest.raises(UnknownPartType):
        await store.checkpoint_message(claim.lease, message=message, step_index=0)
    assert len(store.thread_messages(thread_id)) == 1
    assert store.runs[claim.lease.run_id].step_count == 0


def test_mf_045_the_grammar_accepts_every_pinned_part_type() -> None:
    """MF-045: every AI SDK part type of PROTOCOL.md section 2 passes."""
    check_part_types(
        [
            {"type": "text", "text": "x"},
            {"type": "reasoning", "text": "x", "id": "r"},
            {"type": "custom", "kind": "p.x"},
            {"type": "tool-lookup", "toolCallId": "c1", "state": "input-available", "input": {}},
            {"type": "dynamic-tool", "toolName": "x", "toolCallId": "c2", "state": "output-error"},
            {"type": "source-url", "sourceId": "s", "url": "https://x"},
            {"type": "source-document", "sourceId": "s", "mediaType": "text/plain", "title": "t"},
            {"type": "file", "mediaType": "text/plain", "url": "https://x"},
            {"type": "reasoning-file", "mediaType": "image/png", "url": "https://x"},
            {"type": "data-weather", "data": {}},
            {"type": "data-pai-tool-data", "data": {}},
            {"type": "steering-message", "id": "m", "parts": []},
            {"type": "step-start"},
        ]
    )
