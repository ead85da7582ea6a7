"""The run loop on the in-memory store: one assistant message per step, tools in between."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import (
    InMemoryThreadStore,
    RecordingSink,
    RunEngine,
    ScriptedModel,
    ScriptedStep,
    ToolError,
    define_agent,
    tool,
)
from pai_agents.engine.store import LeaseLost, RunNotFound
from pai_agents.messages.reducer import reduce_chunks
from pai_agents.models.scripted import ScriptedToolCall

pytestmark = pytest.mark.filterwarnings("error")


class LookupInput(BaseModel):
    q: str


@tool(input=LookupInput)
def lookup(args: LookupInput) -> dict[str, Any]:
    """Look something up."""
    return {"answer": 42, "q": args.q}


@tool(input=LookupInput)
async def failing(args: LookupInput) -> None:
    """Always fails."""
    raise ToolError(f"no data for {args.q}")


def _setup(model: ScriptedModel, **agent_options: Any) -> tuple[InMemoryThreadStore, str, Any]:
    agent = define_agent(
        "t", instructions="Be brief.", model=model, tools=[lookup, failing], **agent_options
    )
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="s1", agent_name="t")
    run_id = store.send(
        thread_id, {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    )
    return store, run_id, agent


async def _run(
    store: InMemoryThreadStore, run_id: str, agent: Any, sink: RecordingSink | None = None
):
    claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
    return await RunEngine(agent=agent, store=store, sink=sink or RecordingSink()).run_episode(
        claim
    )


async def test_tool_round_trip_stores_one_assistant_message_per_step() -> None:
    model = ScriptedModel(
        steps=[ScriptedStep.call("lookup", {"q": "x"}), ScriptedStep.reply("The answer is 42.")]
    )
    store, run_id, agent = _setup(model)
    outcome = await _run(store, run_id, agent)

    assert outcome.status == "completed"
    user, step1, step2 = store.thread_messages(store.runs[run_id].thread_id)
    assert user["id"] == "u1"
    tool_part = next(p for p in step1["parts"] if p["type"] == "tool-lookup")
    assert tool_part["state"] == "output-available"
    assert tool_part["input"] == {"q": "x"}
    assert tool_part["output"] == {"answer": 42, "q": "x"}
    assert [p["type"] for p in step2["parts"]] == ["step-start", "text"]
    assert step2["parts"][1] == {"type": "text", "text": "The answer is 42.", "state": "done"}
    assert [s.index for s in store.steps[run_id]] == [0, 1]
    assert all(s.usage.get("outputTokens") for s in store.steps[run_id])
    assert store.runs[run_id].usage["totalTokens"] > 0


async def test_tool_result_is_fed_back_to_the_model() -> None:
    model = ScriptedModel(
        steps=[ScriptedStep.call("lookup", {"q": "x"}, id="c1"), ScriptedStep.reply("ok")]
    )
    store, run_id, agent = _setup(model)
    await _run(store, run_id, agent)

    second = model.requests[1]
    assert second.system == "Be brief."
    assert [m["role"] for m in second.messages] == ["user", "assistant", "tool"]
    assert second.messages[1]["content"][0] == {
        "type": "tool-call",
        "toolCallId": "c1",
        "toolName": "lookup",
        "input": {"q": "x"},
    }
    result = second.messages[2]["content"][0]
    assert result["toolCallId"] == "c1"
    assert result["output"] == {"type": "json", "value": {"answer": 42, "q": "x"}}
    assert {t["name"] for t in second.tools} == {"lookup", "failing"}
    assert second.tools[0]["inputSchema"]["properties"]["q"]["type"] == "string"


async def test_invalid_tool_input_becomes_a_model_visible_error_not_a_crash() -> None:
    model = ScriptedModel(
        steps=[ScriptedStep.call("lookup", {"q": 5}, id="c1"), ScriptedStep.reply("sorry")]
    )
    store, run_id, agent = _setup(model)
    outcome = await _run(store, run_id, agent)

    assert outcome.status == "completed"
    step1 = store.thread_messages(store.runs[run_id].thread_id)[1]
    part = next(p for p in step1["parts"] if p["type"] == "tool-lookup")
    assert part["state"] == "output-error"
    assert "Invalid input for tool lookup" in part["errorText"]
    tool_message = model.requests[1].messages[2]
    assert tool_message["content"][0]["output"]["type"] == "error-text"


async def test_unknown_tool_and_raising_tool_are_errors_the_model_sees() -> None:
    model = ScriptedModel(
        steps=[
            ScriptedStep(
                tool_calls=[
                    ScriptedToolCall(name="nope", input={}, id="a"),
                    ScriptedToolCall(name="failing", input={"q": "z"}, id="b"),
                ]
            ),
            ScriptedStep.reply("done"),
        ]
    )
    store, run_id, agent = _setup(model)
    outcome = await _run(store, run_id, agent)

    assert outcome.status == "completed"
    parts = store.thread_messages(store.runs[run_id].thread_id)[1]["parts"]
    dynamic = next(p for p in parts if p["type"] == "dynamic-tool")
    assert dynamic["toolName"] == "nope" and dynamic["state"] == "output-error"
    failed = next(p for p in parts if p["type"] == "tool-failing")
    assert failed == {**failed, "state": "output-error", "errorText": "no data for z"}


async def test_max_steps_ends_the_run_after_the_last_step() -> None:
    model = ScriptedModel(steps=[ScriptedStep.call("lookup", {"q": str(i)}) for i in range(5)])
    store, run_id, agent = _setup(model, max_steps=2)
    outcome = await _run(store, run_id, agent)

    assert outcome.status == "completed"
    assert len(model.requests) == 2
    assert store.runs[run_id].step_count == 2


async def test_emitted_chunks_rebuild_exactly_the_stored_messages() -> None:
    model = ScriptedModel(
        steps=[
            ScriptedStep(
                reasoning="thinking", tool_calls=[ScriptedToolCall(name="lookup", input={"q": "x"})]
            ),
            ScriptedStep.reply("The answer is 42."),
        ]
    )
    store, run_id, agent = _setup(model)
    sink = RecordingSink()
    await _run(store, run_id, agent, sink)

    stored = store.thread_messages(store.runs[run_id].thread_id)[1:]
    for message in stored:
        chunks = sink.chunks(message["id"])
        assert chunks[0] == {"type": "start", "messageId": message["id"]}
        assert reduce_chunks(chunks) == {**message, "id": message["id"]}
    indexes = [
        e["index"]
        for e in sink.events
        if e["type"] == "generation.message.chunk" and e["messageId"] == stored[0]["id"]
    ]
    assert indexes == list(range(len(indexes)))


async def test_model_failure_fails_the_run_with_a_private_error() -> None:
    model = ScriptedModel(
        steps=[ScriptedStep(text="partial", fail_with=RuntimeError("provider exploded"))]
    )
    store, run_id, agent = _setup(model)
    outcome = await _run(store, run_id, agent)

    assert outcome.status == "failed"
    assert store.runs[run_id].error == {"type": "RuntimeError", "message": "provider exploded"}
    assert store.runs[run_id].status == "failed"


async def test_a_worker_that_lost_its_lease_cannot_write() -> None:
    model = ScriptedModel(steps=[ScriptedStep.reply("hello")])
    store, run_id, agent = _setup(model)
    stale = await store.claim_run(run_id, owner="w1", lease_seconds=-1)  # already expired
    fresh = await store.claim_run(run_id, owner="w2", lease_seconds=30)
    assert fresh.lease.token == stale.lease.token + 1

    with pytest.raises(LeaseLost):
        await store.heartbeat(stale.lease, lease_seconds=30)
    with pytest.raises(LeaseLost):
        await RunEngine(agent=agent, store=store).run_episode(stale)
    assert len(store.thread_messages(store.runs[run_id].thread_id)) == 1
    with pytest.raises(RunNotFound):
        await store.claim_run(run_id, owner="w3", lease_seconds=30)


async def test_sync_and_async_builders_and_runtime_context_reach_tools() -> None:
    seen: dict[str, Any] = {}

    @tool(input=LookupInput)
    def ctx_tool(args: LookupInput, context: Any) -> str:
        """Reads the runtime context."""
        seen["ctx"] = context.runtime_context
        seen["identity"] = context.identity
        return "fine"

    async def instructions(behavior: Any) -> str:
        return f"Workspace {behavior.runtime_context['workspace']}"

    model = ScriptedModel(
        steps=[ScriptedStep.call("ctx_tool", {"q": "x"}), ScriptedStep.reply("ok")]
    )
    agent = define_agent(
        "ctx",
        instructions=instructions,
        model=lambda behavior: model,
        tools=[ctx_tool],
        runtime_context=lambda behavior: {"workspace": behavior.identity["ws"]},
    )
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="s", agent_name="ctx")
    run_id = store.send(
        thread_id,
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]},
        identity={"ws": "acme"},
    )
    outcome = await _run(store, run_id, agent)

    assert outcome.status == "completed"
    assert seen == {"ctx": {"workspace": "acme"}, "identity": {"ws": "acme"}}
    assert model.requests[0].system == "Workspace acme"
