"""Peer-parity rules (docs/coming-from-think.md) that need the Django stack.

``realtime.delivery.publish_inline`` (where in-process publishing ends) is replaced by a
recorder: what it records is everything the websocket consumer and the AI SDK SSE endpoint
ever read (both stream the thread's published events), so an assertion on it covers both
transports.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import ScriptedModel, ScriptedStep, define_agent, tool
from pai_agents.lifecycle import Continue, RunPatch
from pai_threads import services
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Message
from pai_threads.websocket.snapshot import build_snapshot

pytestmark = pytest.mark.django_db(transaction=True)


class AddInput(BaseModel):
    a: int
    b: int


@tool(input=AddInput)
def add(args: AddInput) -> int:
    """Add two integers."""
    return args.a + args.b


def test_th_016_hidden_reasoning_reaches_no_client_surface(
    alice: Identity, published: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """TH-016: with send_reasoning=False no realtime event (websocket, SSE), snapshot, API
    message or stored row carries the reasoning; the model's second step still gets it."""
    model = ScriptedModel(
        steps=[
            ScriptedStep(
                reasoning="hidden plan",
                tool_calls=ScriptedStep.call("add", {"a": 1, "b": 2}).tool_calls,
            ),
            ScriptedStep(reasoning="hidden check", text="3"),
        ]
    )
    agent = define_agent(
        "th-016",
        instructions="x",
        model=model,
        tools=[add],
        lifecycle={"prepare_run": lambda i: Continue(patch=RunPatch(send_reasoning=False))},
    )
    monkeypatch.setattr("pai_threads.execution.execute.registry.get_agent", lambda name: agent)
    thread = services.create_thread(alice)
    sent = services.send(
        alice,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": "1 + 2?"}]},
        dispatch=False,
    )
    outcome = asyncio.run(aexecute_run(sent.run.id))
    assert outcome is not None and outcome.status == "completed"

    chunks = [e["chunk"] for e in published if e["type"] == "generation.message.chunk"]
    assert chunks and not any(c["type"].startswith("reasoning") for c in chunks)
    assert "hidden" not in json.dumps(published)
    assert "hidden" not in json.dumps(build_snapshot(alice, thread.id))
    page = services.list_messages(alice, thread.id)
    assert "hidden" not in json.dumps([m.to_ui_message() for m in page.items])
    stored = list(Message.objects.filter(thread_id=thread.id).values_list("parts", flat=True))
    assert len(stored) == 3 and "hidden" not in json.dumps(stored)
    assert [m.to_ui_message()["parts"][-1].get("text") for m in page.items][-1] == "3"

    second = model.requests[1].messages
    reasoning = [
        c["text"]
        for m in second
        if m["role"] == "assistant"
        for c in m["content"]
        if c.get("type") == "reasoning"
    ]
    assert reasoning == ["hidden plan"]
