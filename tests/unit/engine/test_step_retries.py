"""Per-step retries: ``ModelStepPatch.max_retries`` and one retry loop around
``around_model_call``, on the real ``openai`` provider against the fake HTTP server.

The retry count of a step is the prepare_model_step patch's, else the prepare_run patch's
(TH-019), else the agent's, else the engine's; it holds for that step only (LC-078). The
retry loop wraps around_model_call: a wrapper that calls ``next()`` is called again once per
retry, and the provider sees ``1 + max_retries`` requests, never retries times retries.
"""

from __future__ import annotations

from typing import Any

import pytest

from pai_agents.lifecycle import (
    Continue,
    LifecyclePatchError,
    ModelCallPatch,
    ModelStepPatch,
    RunPatch,
)
from tests.support.engine_harness import harness, text_of
from tests.support.fake_openai import (
    ErrorResponse,
    finish_chunk,
    text_response,
    tool_call_chunks,
    usage_chunk,
)
from tests.unit.engine.test_model_server_limits import FAST, Served, diagnostics


def _step_patch(**patches: ModelStepPatch) -> dict[str, Any]:
    """prepare_model_step returning ``patches[str(step index)]`` (none for other steps)."""

    def prepare_model_step(i: Any) -> Any:
        patch = patches.get(str(i.step.index))
        return Continue(patch=patch) if patch is not None else None

    return {"prepare_model_step": prepare_model_step}


async def test_a_step_patch_sets_the_step_retry_count_over_the_agents() -> None:
    """ModelStepPatch(max_retries=0) wins over the agent's max_retries=3: one request."""
    async with Served([ErrorResponse(503), text_response("never")]) as s:
        h = harness(
            model=s.model,
            tools=(),
            max_retries=3,
            parts=[_step_patch(**{"0": ModelStepPatch(max_retries=0)})],
        )
        assert (await h.run(**FAST)).status == "failed"
        assert len(s.server.requests) == 1


async def test_a_step_patch_wins_over_the_run_patch() -> None:
    """ModelStepPatch(max_retries=2) over RunPatch(max_retries=0): two retries, then the
    answer; the step's diagnostics count them."""
    parts = [
        {"prepare_run": lambda i: Continue(patch=RunPatch(max_retries=0))},
        _step_patch(**{"0": ModelStepPatch(max_retries=2)}),
    ]
    responses = [ErrorResponse(503), ErrorResponse(429), text_response("Third time")]
    async with Served(responses) as s:
        h = harness(model=s.model, tools=(), parts=parts)
        assert (await h.run(**FAST)).status == "completed"
        assert len(s.server.requests) == 3
    assert text_of(h.assistant()[-1]) == "Third time"
    assert diagnostics(h)["retries"] == 2


async def test_a_step_patch_holds_for_its_step_only() -> None:
    """LC-078: step 0's max_retries=0 does not carry into step 1, which retries with the
    agent's count."""
    calls = tool_call_chunks("call_1", "lookup", '{"q": "x"}')
    tool_step = [*calls, finish_chunk("tool_calls"), usage_chunk(5, 5)]
    responses = [tool_step, ErrorResponse(503), text_response("Done")]
    async with Served(responses) as s:
        h = harness(
            model=s.model,
            max_retries=1,
            parts=[_step_patch(**{"0": ModelStepPatch(max_retries=0)})],
        )
        assert (await h.run(**FAST)).status == "completed"
        assert len(s.server.requests) == 3
    assert text_of(h.assistant()[-1]) == "Done"


def test_max_retries_is_checked_and_not_a_call_patch_field() -> None:
    for bad in (-1, True, 1.5, "2"):
        with pytest.raises(LifecyclePatchError, match="max_retries"):
            ModelStepPatch(max_retries=bad)  # type: ignore[arg-type]
    with pytest.raises(LifecyclePatchError, match="around_model_call"):
        ModelCallPatch(max_retries=1)


@pytest.mark.parametrize("max_retries", [1, 2])
async def test_retries_do_not_multiply_under_an_around_model_call_wrapper(max_retries: int) -> None:
    """A wrapper that calls next() sees one retry loop: it is called once per attempt (1 +
    max_retries), each next() makes one request, and each failed attempt's error reaches
    it once; never retries x retries."""
    seen: list[str] = []

    async def around_model_call(request: Any, next: Any) -> Any:
        seen.append("call")
        try:
            return await next()
        except Exception as exc:
            seen.append(type(exc).__name__)
            raise

    parts = [{"around_model_call": around_model_call}]
    responses = [ErrorResponse(503)] * max_retries + [text_response("Finally")]
    async with Served(responses) as s:
        h = harness(model=s.model, tools=(), max_retries=max_retries, parts=parts)
        assert (await h.run(**FAST)).status == "completed"
        assert len(s.server.requests) == max_retries + 1
    assert seen.count("call") == max_retries + 1
    assert len(seen) == 2 * max_retries + 1  # one error per failed attempt
    assert diagnostics(h)["retries"] == max_retries


async def test_exhausted_retries_under_a_wrapper_make_exactly_one_plus_max_requests() -> None:
    async with Served([ErrorResponse(503)] * 9) as s:
        calls: list[int] = []

        async def around_model_call(request: Any, next: Any) -> Any:
            calls.append(1)
            return await next()

        h = harness(
            model=s.model, tools=(), max_retries=2, parts=[{"around_model_call": around_model_call}]
        )
        assert (await h.run(**FAST)).status == "failed"
        assert len(s.server.requests) == 3
    assert len(calls) == 3
