"""LC-047 when the newest message at step start is hidden from the model's context: the
default leaf still cuts at the step-start anchor, so a message the resolver appends does
not reach the model in that step."""

from __future__ import annotations

from typing import Any

from pai_agents import ScriptedStep
from tests.support.engine_harness import harness, request_texts


async def test_lc_047_resolver_append_after_a_hidden_anchor_stays_out_of_the_step() -> None:
    """LC-047: prepare_run appends a transcript-only message (the step-start anchor, hidden
    from context); the resolver then appends a context message: the step's base context
    holds the user's message only, and the appended one is stored."""

    async def prepare_run(input: Any) -> None:
        await input.thread.messages.append(
            role="assistant",
            parts=[{"type": "text", "text": "shown to people only"}],
            visibility={"context": False},
        )

    async def resolve(input: Any, next: Any) -> Any:
        assert input.history.through.visibility.context is False
        await input.thread.messages.append(
            role="user", parts=[{"type": "text", "text": "appended late"}]
        )
        return await next()

    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[{"prepare_run": prepare_run}, {"resolve_model_context": resolve}],
    )
    assert (await h.run()).status == "completed"
    assert request_texts(h.model.requests[0]) == ["user:hello"]
    assert "appended late" in str(h.messages())
