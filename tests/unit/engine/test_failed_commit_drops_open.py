"""No message stays open once the run has ended (docs/durability.md; LC-116 for an abort),
even when the commit of a checkpointed step is what failed (the database away, say): the
run fails and drops the step's open row with its end, as an aborted run does."""

from __future__ import annotations

from typing import Any

from pai_agents import ScriptedStep
from tests.support.engine_harness import harness


async def test_a_failed_commit_of_a_checkpointed_step_leaves_no_open_message() -> None:
    h = harness([ScriptedStep.reply("a long streamed answer")])
    commit = h.store.commit_step

    async def failing_commit(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("the database went away")

    h.store.commit_step = failing_commit  # type: ignore[method-assign]
    outcome = await h.run(checkpoint_seconds=0)  # a checkpoint after every part
    assert outcome.status == "failed", outcome
    assert h.row.status == "failed"
    assert [m for m in h.store.messages if m.status == "open"] == []
    assert h.assistant() == []  # the uncommitted answer went with the run
    h.store.commit_step = commit  # type: ignore[method-assign]


async def test_a_committed_step_is_not_dropped_by_a_later_failure() -> None:
    """The open step is remembered, but only an open row is dropped: a step committed
    before the run failed stays."""
    h = harness([ScriptedStep.call("lookup", {"q": "x"}), ScriptedStep.reply("the answer")])
    finish = h.store.update_message

    async def failing_update(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("the database went away")

    h.store.update_message = failing_update  # type: ignore[method-assign]
    outcome = await h.run(checkpoint_seconds=0)
    assert outcome.status == "failed", outcome
    assert [m.status for m in h.store.messages if m.message["role"] == "assistant"] == ["committed"]
    h.store.update_message = finish  # type: ignore[method-assign]
