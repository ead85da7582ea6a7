"""LC-058 on the in-memory store: a regenerate rewrite lists physical ids (transcript-hidden
ones included) and removes a context-only message after the target from the context."""

from __future__ import annotations

import asyncio
from typing import Any

from pai_agents import ScriptedModel, define_agent
from pai_agents.engine.rewrites import memory_regenerate
from pai_agents.lifecycle.facade import MessageVisibility
from pai_agents.lifecycle.memory import InMemoryLifecycleStore


def test_lc_058_regenerate_removes_a_context_only_message_after_the_target() -> None:
    """LC-058: ids are physical and chronological; the context-only note after the target
    used to stay in the model context (it was not even listed)."""
    store = InMemoryLifecycleStore()
    thread_id = store.create_thread("s")

    def seed(role: Any, text: str, **visibility: bool) -> str:
        parts = [{"type": "text", "text": text}]
        return store.seed_message("s", thread_id, role=role, parts=parts, **visibility).id

    note_before = seed("system", "old note", transcript=False)
    user = seed("user", "q")
    answer = seed("assistant", "a")
    note_after = seed("system", "note on a", transcript=False)
    seen: list[Any] = []
    agent = define_agent(
        "lc058",
        instructions="x",
        model=ScriptedModel(steps=[]),
        lifecycle={"prepare_history_rewrite": lambda i: seen.append(i.rewrite)},
    )
    asyncio.run(memory_regenerate(store, agent, "s", thread_id))
    [rewrite] = seen
    assert rewrite.target_message_id == user
    assert rewrite.retained_message_ids == (note_before, user)
    assert rewrite.removed_message_ids == (answer, note_after)
    visibility = {m.id: m.visibility for m in store.stored_messages("s", thread_id)}
    assert visibility[note_after] == MessageVisibility(transcript=False, context=False)
    assert visibility[note_before] == MessageVisibility(transcript=False, context=True)
