"""LC-108, MF-007 on the ORM store: a hook response's metadata, as streamed in ``start``,
is the committed row's public metadata (it used to be stored as ``{}``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pai_agents import RunEngine, ScriptedModel, define_agent
from pai_agents.engine.events import RecordingSink
from pai_agents.lifecycle import AssistantResponse, Respond
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("metadata", [{"label": "canned"}, {"pai": {"runId": "forged"}}])
def test_lc_108_mf_007_response_metadata_is_stored_as_streamed(
    alice: Identity, metadata: dict[str, Any]
) -> None:
    """LC-108, MF-007, MF-008: live and stored metadata are equal; a forged ``pai`` fails the
    run and nothing is committed."""
    response = AssistantResponse(text="canned", metadata=metadata)
    sink = RecordingSink()

    async def run(run_id: str) -> Any:
        store = ORMThreadStore()
        agent = define_agent(
            "orm-respond",
            instructions="x",
            model=ScriptedModel(steps=[]),
            lifecycle={"prepare_run": lambda i: Respond(response)},
        )
        claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
        return await RunEngine(agent=agent, store=store, sink=sink).run_episode(claim)

    thread = services.create_thread(alice)
    sent = services.send(
        alice,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
        dispatch=False,
    )
    assert sent.run is not None
    outcome = asyncio.run(run(sent.run.id))
    rows = Message.objects.filter(thread_id=thread.id, role="assistant")
    if "pai" in metadata:
        assert outcome.status == "failed"
        assert not rows.exists()
        return
    assert outcome.status == "completed"
    [start] = [c for c in sink.chunks() if c["type"] == "start"]
    assert start["messageMetadata"] == metadata
    row = rows.get()
    assert row.metadata == metadata
    assert {k: v for k, v in row.to_ui_message()["metadata"].items() if k != "pai"} == metadata
