"""The thread-title job has one deadline, runtime-context builder included (real database)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_slow_runtime_context_builder_is_inside_the_title_deadline(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The title job has one deadline: a runtime_context builder that hangs cannot keep the
    job (and its executor slot) forever; the title stays unchanged."""
    import asyncio
    import functools

    from pai_agents import ScriptedModel, ScriptedStep, ThreadTitles, define_agent
    from pai_threads import services
    from pai_threads.execution import registry, titles
    from pai_threads.models import Thread
    from tests.integration.test_thread_titles import _run

    async def slow_context(_: Any) -> dict[str, Any]:
        if slow_context.calls:  # type: ignore[attr-defined]
            await asyncio.sleep(30)
        slow_context.calls += 1  # type: ignore[attr-defined]
        return {}

    slow_context.calls = 0  # type: ignore[attr-defined]
    agent = define_agent(
        "slow-context",
        instructions="Help.",
        model=ScriptedModel(respond=lambda request: ScriptedStep.reply("A title")),
        runtime_context=slow_context,
        thread_titles=ThreadTitles(
            generator=lambda title_input: "Never stored", timeout_seconds=0.2
        ),
    )
    agents = {**registry.agents(), agent.name: agent}
    # lru_cache keeps the registry's cache_clear(), which a settings reload calls.
    monkeypatch.setattr(registry, "agents", functools.lru_cache(maxsize=None)(lambda: agents))
    monkeypatch.setattr(titles, "schedule", lambda **kwargs: None)

    thread = services.create_thread(alice, agent=agent.name)
    run = _run(alice, thread.id)
    assert asyncio.run(titles.agenerate(thread.id, run.id)) is None
    assert Thread.objects.get(id=thread.id).title == ""
