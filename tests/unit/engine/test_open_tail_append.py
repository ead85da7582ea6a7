"""A hook appends while a step streams into a checkpointed open message (MF-043, LC-011,
LC-032): the run goes on, and the step's message is committed behind the appended one."""

from __future__ import annotations

from typing import Any

from pai_agents import ScriptedStep
from tests.support.engine_harness import harness, text_of


async def test_mf_043_hook_append_during_a_checkpointed_step_does_not_fail_the_run() -> None:
    """MF-043, LC-011, LC-032: ``thread.messages.append()`` from ``transform_step_stream``
    after the step's first checkpoint used to make the next checkpoint raise
    ``OpenMessageConflict`` and fail the run; the open message now stays the tail."""
    appended: list[Any] = []

    async def transform(input: Any) -> Any:
        async def stream() -> Any:
            async for part in input.stream:
                yield part
                if part["type"] == "text-delta" and not appended:
                    appended.append(
                        await input.thread.messages.append(
                            role="user", parts=[{"type": "text", "text": "by the way"}]
                        )
                    )

        return stream()

    h = harness(
        [ScriptedStep.reply("a long streamed answer")],
        parts=[{"transform_step_stream": transform}],
    )
    outcome = await h.run(checkpoint_seconds=0)  # a checkpoint after every part
    assert outcome.status == "completed", outcome
    messages = h.messages()
    note = next(m for m in messages if m["id"] == appended[0].id)
    assert messages.index(note) < messages.index(h.assistant()[0])
    assert text_of(h.assistant()[0]) == "a long streamed answer"
    assert all(m.status == "committed" for m in h.store.messages)
