"""prepare_model_step, around_model_call, layering, pruning and tool authority in the engine."""

from __future__ import annotations

from typing import Any

import pytest

from pai_agents import ScriptedModel, ScriptedStep
from pai_agents.lifecycle import (
    AgentLifecycle,
    Block,
    Continue,
    ModelCallPatch,
    ModelStepPatch,
    Respond,
    RunPatch,
)
from pai_agents.models.base import ModelError, ModelSelection
from tests.support.engine_harness import executed, harness, request_texts, text_of


async def test_lc_077_lc_078_step_patches_are_ephemeral() -> None:
    """LC-077, LC-078, LC-088: step 0's instructions patch does not reach step 1."""
    seen: list[Any] = []

    def step(input: Any) -> Any:
        seen.append(input.input.instructions)
        if input.step.index == 0:
            return Continue(patch=ModelStepPatch(instructions="step zero only"))
        return None

    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("ok")],
        parts=[{"prepare_model_step": step}],
    )
    await h.run()
    assert [r.system for r in h.model.requests] == ["step zero only", "be brief"]
    assert seen == ["be brief", "be brief"]


async def test_lc_079_step_messages_replace_the_model_input_for_one_step() -> None:
    """LC-079, TH-027: a step patch's messages replace this step's input only."""

    def step(input: Any) -> Any:
        if input.step.index == 0:
            return Continue(patch=ModelStepPatch(messages=[{"role": "user", "content": "short"}]))
        return None

    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("ok")],
        parts=[{"prepare_model_step": step}],
    )
    await h.run()
    assert request_texts(h.model.requests[0]) == ["user:short"]
    assert request_texts(h.model.requests[1])[0] == "user:hello"


async def test_lc_080_lc_082_step_respond_skips_model_and_tool_phases() -> None:
    """LC-080, LC-082: respond commits the answer; around_model_call and tools never run."""
    calls: list[str] = []

    async def around(request: Any, next: Any) -> Any:
        calls.append("around")
        return await next()

    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"})],
        parts=[
            {"prepare_model_step": lambda i: Respond("canned")},
            {"around_model_call": around, "before_tool_call": lambda i: calls.append("tool")},
        ],
    )
    outcome = await h.run()
    assert outcome.status == "completed"
    assert calls == [] and h.model.requests == []
    assert text_of(h.assistant()[0]) == "canned"


async def test_lc_081_block_ends_blocked_with_or_without_a_response() -> None:
    """LC-081: block ends the run blocked; the response is committed only when given."""
    h = harness([], parts=[{"prepare_model_step": lambda i: Block("unsafe")}])
    assert (await h.run()).status == "blocked"
    assert h.assistant() == [] and h.row.error == {"reason": "unsafe"}

    h = harness([], parts=[{"prepare_model_step": lambda i: Block("unsafe", response="Nope.")}])
    assert (await h.run()).status == "blocked"
    assert text_of(h.assistant()[0]) == "Nope."


async def test_lc_083_lc_084_lc_085_layers_merge_in_order_into_the_provider_request() -> None:
    """LC-083..LC-085: selection -> run patch -> step patches -> call patches, merged."""
    model = ScriptedModel(steps=[ScriptedStep.reply("ok")])
    selection = ModelSelection(
        model=model,
        settings={"temperature": 0.9, "seed": 1},
        provider_options={"openai": {"a": 1}, "anthropic": {"b": 2}},
    )

    class Layers(AgentLifecycle):
        def prepare_run(self, input: Any) -> Any:
            return Continue(patch=RunPatch(model_settings={"maxOutputTokens": 100}))

        def prepare_model_step(self, input: Any) -> Any:
            return Continue(
                patch=ModelStepPatch(
                    model_settings={"temperature": 0.2}, provider_options={"openai": {"c": 3}}
                )
            )

        async def around_model_call(self, request: Any, next: Any) -> Any:
            return await next(ModelCallPatch(model_settings={"topP": 0.5}))

    h = harness(parts=[Layers()], model=selection)
    await h.run()
    [request] = model.requests
    assert request.settings == {"temperature": 0.2, "seed": 1, "maxOutputTokens": 100, "topP": 0.5}
    assert request.provider_options == {"openai": {"c": 3}, "anthropic": {"b": 2}}


async def test_lc_090_around_model_call_wrappers_first_part_outermost() -> None:
    """LC-090, LC-091: first part outermost; inner sees the outer's patch."""
    order: list[str] = []

    def wrapper(name: str, patch: Any = None) -> dict[str, Any]:
        async def around(request: Any, next: Any) -> Any:
            order.append(f"{name}:in:{request.model_settings.get('seed')}")
            result = await (next(patch) if patch else next())
            order.append(f"{name}:out")
            return result

        return {"around_model_call": around, "name": name}

    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[wrapper("outer", ModelCallPatch(model_settings={"seed": 7})), wrapper("inner")],
    )
    await h.run()
    assert order == ["outer:in:None", "inner:in:7", "inner:out", "outer:out"]
    assert h.model.requests[0].settings.get("seed") == 7
    assert [c for c in h.trace.calls if c[1] == "around_model_call"] == [
        ("outer", "around_model_call"),
        ("inner", "around_model_call"),
    ]


async def test_lc_095_setup_failure_raises_from_next_and_can_fall_back() -> None:
    """LC-095, LC-158, TH-019: a provider setup error is catchable in around_model_call."""
    fallback = ScriptedModel(steps=[ScriptedStep.reply("from fallback")], model_name="backup")

    class Down:
        provider, model_id = "down", "down-1"
        requests: list[Any] = []

        async def stream(self, request: Any, *, signal: Any = None) -> Any:
            self.requests.append(request)
            raise ModelError("503")
            yield  # an async generator that fails before its first part

    primary = Down()

    async def around(request: Any, next: Any) -> Any:
        try:
            return await next()
        except ModelError:
            return await next(ModelCallPatch(model=fallback))

    h = harness(parts=[{"around_model_call": around}], model=primary)
    outcome = await h.run()
    assert outcome.status == "completed"
    assert text_of(h.assistant()[0]) == "from fallback"
    assert len(primary.requests) == 1 and len(fallback.requests) == 1


async def test_lc_096_a_cached_stream_is_used_without_a_provider_call() -> None:
    """LC-096: a wrapper may return a stream without calling next()."""
    from pai_agents.lifecycle import ModelStepStreamResult
    from pai_agents.lifecycle.streams import iterate

    async def cached(request: Any, next: Any) -> Any:
        return ModelStepStreamResult(
            stream=iterate(
                [
                    {"type": "text-start", "id": "c"},
                    {"type": "text-delta", "id": "c", "delta": "cached answer"},
                    {"type": "text-end", "id": "c"},
                    {"type": "finish", "finishReason": "stop", "usage": {}},
                ]
            )
        )

    h = harness([], parts=[{"around_model_call": cached}])
    assert (await h.run()).status == "completed"
    assert h.model.requests == []
    assert text_of(h.assistant()[0]) == "cached answer"


async def test_lc_128_a_tool_omitted_by_a_patch_cannot_execute() -> None:
    """LC-128, AD-057, TH-012: tools=[] -> the model's call to lookup is a tool error."""
    h = harness(
        [ScriptedStep.call("lookup", {"q": "forged"}), ScriptedStep.reply("ok")],
        parts=[{"prepare_model_step": lambda i: Continue(patch=ModelStepPatch(tools=[]))}],
    )
    outcome = await h.run()
    assert outcome.status == "completed"
    assert executed == []
    assert h.model.requests[0].tools == []
    first = h.assistant()[0]
    [call] = [p for p in first["parts"] if p.get("toolCallId")]
    assert call["state"] == "output-error"


async def test_lc_097_lc_101_reasoning_pruned_for_the_provider_not_for_hooks() -> None:
    """LC-097, LC-098, LC-101, LC-102: stale reasoning is pruned right before the attempt;
    hooks see it and the stored history keeps it."""
    history = [
        {"id": "u0", "role": "user", "parts": [{"type": "text", "text": "earlier"}]},
        {
            "id": "a0",
            "role": "assistant",
            "parts": [{"type": "reasoning", "text": "old thoughts"}, {"type": "text", "text": "x"}],
        },
    ]
    hook_saw: list[Any] = []
    h = harness(
        [ScriptedStep.reply("ok")],
        parts=[{"prepare_model_step": lambda i: hook_saw.append(i.input.messages)}],
        history=history,
    )
    await h.run()
    [request] = h.model.requests
    provider_parts = [c["type"] for m in request.messages for c in m["content"]]
    assert "reasoning" not in provider_parts
    hook_parts = [c["type"] for m in hook_saw[0] for c in m["content"]]
    assert "reasoning" in hook_parts
    stored = h.messages()[1]
    assert stored["parts"][0] == {"type": "reasoning", "text": "old thoughts"}
    steps = h.store.steps[h.run_id]
    assert steps[0].request["messageCount"] == len(request.messages)


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_lc_001_sync_and_async_hooks_have_the_same_effect(asynchronous: bool) -> None:
    """LC-001, LC-002: def and async def hooks both work; None means no change."""
    if asynchronous:

        async def hook(input: Any) -> Any:
            return Continue(patch=ModelStepPatch(model_settings={"seed": 3}))
    else:

        def hook(input: Any) -> Any:
            return Continue(patch=ModelStepPatch(model_settings={"seed": 3}))

    h = harness([ScriptedStep.reply("ok")], parts=[{"prepare_model_step": hook}])
    await h.run()
    assert h.model.requests[0].settings["seed"] == 3
