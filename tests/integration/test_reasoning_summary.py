"""Reasoning summaries through the Django stack (AD-051, MF-013, TH-016).

``realtime.delivery.publish_inline`` (where in-process publishing ends) is replaced by a
recorder: what it records is everything the websocket consumer and the AI SDK SSE endpoint
ever read, so an assertion on it covers both transports. The stored row, the snapshot and
the message page are read back from the database, as a refreshed client reads them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pai_agents import ReasoningSummary, ScriptedModel, ScriptedStep, define_agent
from pai_agents.lifecycle import Continue, RunPatch
from pai_agents.messages.reasoning_summary import REASONING_SUMMARY_PART
from pai_threads import services
from pai_threads.api.serializers import messages_out
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Message
from pai_threads.websocket.snapshot import build_snapshot

pytestmark = pytest.mark.django_db(transaction=True)


def _run(alice: Identity, monkeypatch: pytest.MonkeyPatch, agent: Any) -> str:
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
    return thread.id


def _reasoning(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"] == "reasoning"]


def test_ad_051_mf_013_summary_is_stored_and_shown_live_and_after_refresh(
    alice: Identity, published: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """AD-051, MF-013: the summary is published as a chunk of its step message, stored in
    that message's row, and every refreshed client view (snapshot, message page, the
    finished generation's message) shows it as ``summary`` on its reasoning part, never as
    the raw reserved part."""
    agent = define_agent(
        "reasoning-summary",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep(reasoning="Add one and two.", text="3")]),
        reasoning_summary=ReasoningSummary(generator=lambda i: "Adds the numbers"),
    )
    thread_id = _run(alice, monkeypatch, agent)

    chunks = [e["chunk"] for e in published if e["type"] == "generation.message.chunk"]
    live = [c for c in chunks if c["type"] == REASONING_SUMMARY_PART]
    assert live == [
        {
            "type": REASONING_SUMMARY_PART,
            "id": "0",
            "data": {"reasoningOrdinal": 0, "summary": "Adds the numbers"},
        }
    ]

    row = Message.objects.filter(thread_id=thread_id, role="assistant").get()
    assert [p for p in row.parts if p["type"] == REASONING_SUMMARY_PART] == live

    snapshot = build_snapshot(alice, thread_id)
    [answer] = [m for m in snapshot["messages"] if m["role"] == "assistant"]
    [part] = _reasoning(answer)
    assert (part["text"], part["state"], part["summary"]) == (
        "Add one and two.",
        "done",
        "Adds the numbers",
    )
    assert REASONING_SUMMARY_PART not in json.dumps(snapshot)

    page = messages_out(services.list_messages(alice, thread_id).items)
    assert _reasoning(page[-1])[0]["summary"] == "Adds the numbers"
    assert REASONING_SUMMARY_PART not in json.dumps(page)

    [finished] = [e for e in published if e["type"] == "generation.finished"]
    assert _reasoning(finished["message"])[0]["summary"] == "Adds the numbers"
    assert REASONING_SUMMARY_PART not in json.dumps(finished["message"])


def test_th_016_hidden_reasoning_gets_no_summary(
    alice: Identity, published: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """TH-016: reasoning kept from clients is never summarized: nothing published or stored."""
    calls: list[Any] = []
    agent = define_agent(
        "reasoning-summary",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep(reasoning="hidden plan", text="3")]),
        lifecycle={"prepare_run": lambda i: Continue(patch=RunPatch(send_reasoning=False))},
        reasoning_summary=ReasoningSummary(generator=lambda i: calls.append(i) or "leak"),
    )
    thread_id = _run(alice, monkeypatch, agent)
    assert calls == []
    assert "leak" not in json.dumps(published)
    stored = list(Message.objects.filter(thread_id=thread_id).values_list("parts", flat=True))
    assert "leak" not in json.dumps(stored)
