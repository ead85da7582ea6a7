"""The hook examples of docs/reference/agents.md ("Hooks"), executed from the page."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from pai_agents import ScriptedStep, define_agent
from pai_agents.engine.rewrites import RewriteDispatcher, memory_regenerate
from pai_agents.lifecycle import PHASES
from pai_agents.lifecycle.memory import InMemoryLifecycleStore
from tests.support.engine_harness import harness, text_of

DOC = Path(__file__).resolve().parents[3] / "docs" / "reference" / "agents.md"
_BLOCK = re.compile(r"<!-- hook-example: (\w+) -->\s*```python\n(.*?)```", re.DOTALL)


def examples() -> dict[str, str]:
    return dict(_BLOCK.findall(DOC.read_text()))


def run_example(name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"hooks_example_{name}"}
    exec(compile(examples()[name], f"{DOC}:{name}", "exec"), namespace)
    return namespace


def test_every_phase_has_an_example_that_defines_an_agent() -> None:
    found = examples()
    covered = {p for name in found for p in PHASES if p in found[name]}
    assert covered == set(PHASES)
    for name in found:
        namespace = run_example(name)
        agent = define_agent(
            f"doc-{name}",
            instructions="x",
            model=lambda _: None,
            lifecycle=namespace["lifecycle"],
            thread_metadata=namespace.get("thread_metadata"),
        )
        assert agent.lifecycle is not None


def test_prepare_run_example_responds_and_patches() -> None:
    lifecycle = run_example("prepare_run")["lifecycle"]
    h = harness([ScriptedStep.reply("hi")], parts=[lifecycle], prompt="my password is x")
    assert asyncio.run(h.run()).status == "completed"
    assert text_of(h.assistant()[0]) == "I can't help with passwords."


def test_transform_step_stream_example_is_what_is_stored() -> None:
    lifecycle = run_example("transform_step_stream")["lifecycle"]
    h = harness([ScriptedStep.reply("quiet please")], parts=[lifecycle])
    assert asyncio.run(h.run()).status == "completed"
    assert text_of(h.assistant()[0]) == "QUIET PLEASE"


@pytest.mark.parametrize("cursor_removed", [True, False])
def test_history_rewrite_example_resets_a_removed_cursor(cursor_removed: bool) -> None:
    namespace = run_example("history_rewrite")
    agent = define_agent(
        "doc-rw",
        instructions="x",
        model=lambda _: None,
        lifecycle=namespace["lifecycle"],
        thread_metadata=namespace["thread_metadata"],
    )
    store = InMemoryLifecycleStore(thread_metadata=namespace["thread_metadata"])
    thread_id = store.create_thread("s")
    ids = [
        store.seed_message("s", thread_id, role=role, parts=[{"type": "text", "text": "x"}]).id
        for role in ("user", "assistant")
    ]
    cursor = ids[1] if cursor_removed else ids[0]
    store._threads[("s", thread_id)].private = {"summarized_through": cursor}
    rewritten = RewriteDispatcher()
    done = asyncio.run(memory_regenerate(store, agent, "s", thread_id, rewritten=rewritten))
    assert rewritten.wait_idle()
    expected = None if cursor_removed else cursor
    assert store.thread_bags("s", thread_id).private == {"summarized_through": expected}
    assert namespace["facts"] == [done.after_version]
