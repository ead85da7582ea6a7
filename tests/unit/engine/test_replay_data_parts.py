"""MF-027: the emitted chunks rebuild exactly the stored message, data parts included."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from pai_agents import InMemoryThreadStore, RecordingSink, RunEngine, ScriptedModel, ScriptedStep
from pai_agents.define import define_agent
from pai_agents.messages.reducer import reduce_chunks


class Progress(BaseModel):
    percent: int


class Source(BaseModel):
    url: str


async def test_mf_027_replay_of_data_parts_equals_the_stored_message() -> None:
    """A data part written twice under one id is replaced in place; others append."""

    async def transform(input: Any) -> Any:
        async def stream() -> Any:
            input.ui_data.write({"type": "data-progress", "id": "p", "data": {"percent": 10}})
            async for part in input.stream:
                yield part
            input.ui_data.write({"type": "data-progress", "id": "p", "data": {"percent": 100}})
            input.ui_data.write({"type": "data-source", "data": {"url": "https://example.com"}})

        return stream()

    agent = define_agent(
        "data",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep(reasoning="think", text="answer")]),
        lifecycle={"transform_step_stream": transform},
        ui_data_schemas={"progress": Progress, "source": Source},
    )
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="s", agent_name="data")
    run_id = store.send(
        thread_id, {"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]}
    )
    sink = RecordingSink()
    claim = await store.claim_run(run_id, owner="w", lease_seconds=30)
    assert (
        await RunEngine(agent=agent, store=store, sink=sink).run_episode(claim)
    ).status == "completed"

    stored = store.thread_messages(thread_id)[1]
    assert reduce_chunks(sink.chunks(stored["id"])) == stored
    data = [p for p in stored["parts"] if p["type"].startswith("data-")]
    assert data == [
        {"type": "data-progress", "id": "p", "data": {"percent": 100}},
        {"type": "data-source", "data": {"url": "https://example.com"}},
    ]
    assert [p["type"] for p in stored["parts"]][:3] == ["step-start", "data-progress", "reasoning"]
