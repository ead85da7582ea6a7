"""Durable episodes on the in-memory store: approvals, cancel, recovery, fencing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import (
    AbortSignal,
    InMemoryThreadStore,
    RecordingSink,
    RunEngine,
    ScriptedModel,
    ScriptedStep,
    define_agent,
    tool,
)
from pai_agents.engine.store import LeaseLost

executions: list[str] = []


class Args(BaseModel):
    q: str


@tool(input=Args, needs_approval=True)
def wire_money(args: Args) -> dict[str, Any]:
    """Moves money; a person approves each call."""
    executions.append(args.q)
    return {"sent": args.q}


@tool(input=Args)
def lookup(args: Args) -> str:
    """Plain lookup."""
    executions.append(args.q)
    return "found"


@tool(input=Args, idempotent=True)
def refresh(args: Args) -> str:
    """Safe to repeat."""
    executions.append(args.q)
    return "refreshed"


@tool(input=Args)
async def slow(args: Args) -> str:
    """Takes a while."""
    await asyncio.sleep(5)
    return "late"


@pytest.fixture(autouse=True)
def _reset() -> None:
    executions.clear()


def _setup(model: ScriptedModel) -> tuple[InMemoryThreadStore, str, Any]:
    agent = define_agent(
        "d", instructions="x", model=model, tools=[wire_money, lookup, refresh, slow]
    )
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="s", agent_name="d")
    run_id = store.send(
        thread_id, {"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]}
    )
    return store, run_id, agent


async def _episode(store: InMemoryThreadStore, run_id: str, agent: Any, **engine: Any):
    claim = await store.claim_run(run_id, owner="w", lease_seconds=engine.pop("claim_lease", 30))
    return await RunEngine(agent=agent, store=store, **engine).run_episode(claim)


def _parts(store: InMemoryThreadStore, run_id: str) -> list[dict[str, Any]]:
    thread_id = store.runs[run_id].thread_id
    return [p for m in store.thread_messages(thread_id)[1:] for p in m["parts"]]


async def test_approval_suspends_the_run_and_an_approved_call_executes_once() -> None:
    model = ScriptedModel(
        steps=[
            ScriptedStep.call("wire_money", {"q": "10 EUR"}, id="c1"),
            ScriptedStep.reply("sent"),
        ]
    )
    store, run_id, agent = _setup(model)

    waiting = await _episode(store, run_id, agent)
    assert waiting.status == "waiting" and executions == []
    part = next(p for p in _parts(store, run_id) if p["type"] == "tool-wire_money")
    assert part["state"] == "approval-requested" and part["approval"]["id"].startswith("apr_")
    assert store.runs[run_id].lease_owner is None

    store.respond(run_id, "c1", approved=True)
    done = await _episode(store, run_id, agent)
    assert done.status == "completed"
    assert executions == ["10 EUR"]
    part = next(p for p in _parts(store, run_id) if p["type"] == "tool-wire_money")
    assert part["state"] == "output-available" and part["output"] == {"sent": "10 EUR"}
    assert part["approval"]["approved"] is True
    assert store.thread_messages(store.runs[run_id].thread_id)[-1]["parts"][-1]["text"] == "sent"


async def test_a_denied_call_is_output_denied_and_the_model_sees_the_denial() -> None:
    model = ScriptedModel(
        steps=[ScriptedStep.call("wire_money", {"q": "x"}, id="c1"), ScriptedStep.reply("ok")]
    )
    store, run_id, agent = _setup(model)
    await _episode(store, run_id, agent)
    store.respond(run_id, "c1", approved=False, reason="too much")
    assert (await _episode(store, run_id, agent)).status == "completed"

    assert executions == []
    part = next(p for p in _parts(store, run_id) if p["type"] == "tool-wire_money")
    assert part["state"] == "output-denied"
    tool_message = model.requests[1].messages[-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"][-1]["output"] == {"type": "error-text", "value": "too much"}


async def test_cancel_during_the_stream_commits_the_partial_step_and_ends_cancelled() -> None:
    model = ScriptedModel(steps=[ScriptedStep.reply("word " * 200, chunk_size=5, delay=0.01)])
    store, run_id, agent = _setup(model)
    sink = RecordingSink()
    signal = AbortSignal()

    async def cancel_soon() -> None:
        await asyncio.sleep(0.15)
        signal.abort("cancelled")

    claim = await store.claim_run(run_id, owner="w", lease_seconds=30)
    outcome, _ = await asyncio.gather(
        RunEngine(agent=agent, store=store, sink=sink).run_episode(claim, signal=signal),
        cancel_soon(),
    )
    assert outcome.status == "cancelled"
    text = next(p for p in _parts(store, run_id) if p["type"] == "text")
    assert 0 < len(text["text"]) < len("word " * 200)
    assert text["state"] == "done"
    assert store.runs[run_id].status == "cancelled"


async def test_cancel_requested_in_the_store_reaches_a_running_tool_through_the_heartbeat() -> None:
    model = ScriptedModel(steps=[ScriptedStep.call("slow", {"q": "x"}, id="c1")])
    store, run_id, agent = _setup(model)

    async def request_cancel() -> None:
        await asyncio.sleep(0.2)
        store.request_cancel(run_id)

    outcome, _ = await asyncio.gather(
        _episode(store, run_id, agent, lease_seconds=0.3), request_cancel()
    )
    assert outcome.status == "cancelled"
    part = next(p for p in _parts(store, run_id) if p["type"] == "tool-slow")
    assert part["state"] == "output-error"
    assert part["toolMetadata"] == {"pai": {"source": "cancel"}}


async def test_recovery_settles_a_tool_call_a_dead_worker_was_executing() -> None:
    """A call recorded but never finished becomes an output-error with source recovery."""
    model = ScriptedModel(
        steps=[ScriptedStep.call("lookup", {"q": "x"}, id="c1"), ScriptedStep.reply("recovered")]
    )
    store, run_id, agent = _setup(model)
    claim = await store.claim_run(run_id, owner="dead", lease_seconds=30)
    # The dead worker committed step 0 (call recorded) and died before the tool finished.
    engine = RunEngine(agent=agent, store=store)
    step_message = {
        "id": "m0",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-lookup",
                "toolCallId": "c1",
                "state": "input-available",
                "input": {"q": "x"},
            },
        ],
    }
    from datetime import UTC, datetime

    from pai_agents.engine.store import StepRecord

    now = datetime.now(UTC)
    await store.commit_step(
        claim.lease,
        message=step_message,  # type: ignore[arg-type]
        step=StepRecord(
            index=0,
            message_id="m0",
            request={},
            usage={},
            finish_reason="tool-calls",
            started_at=now,
            finished_at=now,
        ),
    )
    model._queue.pop(0)  # the dead attempt consumed the first model step
    expire(store, run_id)  # the dead worker's lease runs out (it wrote before that, LC-033)

    outcome = await _episode(store, run_id, agent)
    assert outcome.status == "completed"
    assert executions == []  # at most once: not re-run
    messages = store.thread_messages(store.runs[run_id].thread_id)
    assert [m["id"] for m in messages].count("m0") == 1
    part = messages[1]["parts"][1]
    assert part["state"] == "output-error" and part["toolMetadata"] == {
        "pai": {"source": "recovery"}
    }
    assert messages[-1]["parts"][-1]["text"] == "recovered"
    with pytest.raises(LeaseLost):
        await store.heartbeat(claim.lease, lease_seconds=30)
    del engine


async def test_recovery_reruns_an_interrupted_idempotent_tool() -> None:
    model = ScriptedModel(steps=[ScriptedStep.reply("done")])
    store, run_id, agent = _setup(model)
    claim = await store.claim_run(run_id, owner="dead", lease_seconds=30)
    from datetime import UTC, datetime

    from pai_agents.engine.store import StepRecord

    now = datetime.now(UTC)
    await store.commit_step(
        claim.lease,
        message={
            "id": "m0",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {
                    "type": "tool-refresh",
                    "toolCallId": "c1",
                    "state": "input-available",
                    "input": {"q": "again"},
                },
            ],
        },  # type: ignore[arg-type]
        step=StepRecord(
            index=0,
            message_id="m0",
            request={},
            usage={},
            finish_reason="tool-calls",
            started_at=now,
            finished_at=now,
        ),
    )
    expire(store, run_id)  # the dead worker's lease runs out (it wrote before that, LC-033)
    assert (await _episode(store, run_id, agent)).status == "completed"
    assert executions == ["again"]
    part = store.thread_messages(store.runs[run_id].thread_id)[1]["parts"][1]
    assert part["state"] == "output-available" and part["output"] == "refreshed"


def expire(store: Any, run_id: str) -> None:
    """The run's lease ran out a second ago (its worker died)."""
    from datetime import UTC, datetime, timedelta

    store.runs[run_id].lease_expires_at = datetime.now(UTC) - timedelta(seconds=1)


async def test_an_approved_call_whose_tool_is_gone_says_so_and_runs_nothing() -> None:
    """A tool removed between the approval and the resume (a redeploy, an MCP server that no
    longer lists it) is a model-visible "no longer available", not a worker recovery."""
    model = ScriptedModel(
        steps=[ScriptedStep.call("wire_money", {"q": "5 EUR"}, id="c1"), ScriptedStep.reply("ok")]
    )
    store, run_id, agent = _setup(model)
    assert (await _episode(store, run_id, agent)).status == "waiting"
    store.respond(run_id, "c1", approved=True)
    without = define_agent("d", instructions="x", model=model, tools=[lookup])
    assert (await _episode(store, run_id, without)).status == "completed"
    assert executions == []
    part = next(p for p in _parts(store, run_id) if p["type"] == "tool-wire_money")
    assert part["state"] == "output-error"
    assert "no longer available" in part["errorText"] and "worker" not in part["errorText"]
