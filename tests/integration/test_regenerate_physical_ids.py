"""LC-058 on the ORM store: a regenerate rewrite lists physical ids and removes a
context-only message after the target from the model context."""

from __future__ import annotations

from typing import Any

import pytest

from pai_agents import ScriptedModel, define_agent
from pai_threads import services
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message

pytestmark = pytest.mark.django_db(transaction=True)


def test_lc_058_regenerate_removes_a_context_only_message_after_the_target(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LC-058: ids are physical and chronological; the context-only note after the target
    used to stay in the model context (it was not even listed)."""
    seen: list[Any] = []
    agent = define_agent(
        "lc058",
        instructions="x",
        model=ScriptedModel(steps=[]),
        lifecycle={"prepare_history_rewrite": lambda i: seen.append(i.rewrite)},
    )
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)
    thread = services.create_thread(alice, agent="lc058")
    rows = [
        ("n0", "system", False, Message.Producer.LIFECYCLE),
        ("m1", "user", True, Message.Producer.SEND),
        ("m2", "assistant", True, Message.Producer.MODEL),
        ("n3", "system", False, Message.Producer.LIFECYCLE),
    ]
    for message_id, role, transcript, producer in rows:
        Message.objects.create(
            message_id=message_id,
            thread=thread,
            scope_key=thread.scope_key,
            role=role,
            parts=[{"type": "text", "text": message_id}],
            producer=producer,
            in_transcript=transcript,
        )
    services.regenerate(alice, thread.id, dispatch=False)
    [rewrite] = seen
    assert rewrite.target_message_id == "m1"
    assert rewrite.retained_message_ids == ("n0", "m1")
    assert rewrite.removed_message_ids == ("m2", "n3")
    context = Message.objects.filter(thread=thread, in_context=True).order_by("id")
    assert list(context.values_list("message_id", flat=True)) == ["n0", "m1"]
