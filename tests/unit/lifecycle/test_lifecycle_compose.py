"""compose_lifecycle: order, accumulation, short circuits, wrappers and middleware
(LC-001, LC-002, LC-005, LC-040..LC-042, LC-077, LC-090, LC-091, LC-095, LC-096,
LC-110, LC-130, LC-153..LC-159)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lifecycle_support import FakeModel, World, make_request

from pai_agents.lifecycle import (
    AfterStepInfo,
    AfterStepInput,
    AfterToolResultInput,
    AgentLifecycle,
    AnchoredHistory,
    BeforeToolCallInput,
    Block,
    Complete,
    Continue,
    Fail,
    LifecycleMessage,
    LifecycleResultError,
    LifecycleTrace,
    ModelCallPatch,
    ModelStepPatch,
    ModelStepStreamResult,
    NextStep,
    NextStepPatch,
    PrepareModelStepInput,
    PrepareRunInput,
    Reject,
    ReplaceInput,
    ReplaceMessage,
    ReplaceOutput,
    ResolveModelContextInput,
    Respond,
    RunPatch,
    Skip,
    StepInfo,
    StepToolCall,
    ToolCallInfo,
    ToolInfo,
    ToolResult,
    TransformStepStreamInput,
    UiDataWriterImpl,
    abort_step,
    apply_patch,
    compose_lifecycle,
    open_model_stream,
    run_model_call,
    to_model_request,
)
from pai_agents.lifecycle.streams import iterate
from pai_agents.models.base import ModelError

STEP = StepInfo(step_id="step_1", index=0)


def prepare_run_input(world: World) -> PrepareRunInput:
    return PrepareRunInput(**world.base(), input={"text": "hi"})


def prepare_step_input(world: World, request: Any = None) -> PrepareModelStepInput:
    return PrepareModelStepInput(**world.base(), step=STEP, input=request or make_request())


def tool_input(world: World, value: Any = None) -> BeforeToolCallInput:
    return BeforeToolCallInput(
        **world.base(),
        step=STEP,
        tool=ToolInfo(name="search"),
        call=ToolCallInfo(tool_call_id="call_1"),
        input=value if value is not None else {"q": "x"},
    )


def after_step_input(world: World, *, tool_calls: tuple[str, ...] = ()) -> AfterStepInput:
    message = LifecycleMessage(id="m1", role="assistant", parts=({"type": "text", "text": "a"},))
    return AfterStepInput(
        **world.base(),
        step=AfterStepInfo(
            step_id="s1",
            index=0,
            message=message,
            finish_reason="stop",
            tool_calls=tuple(
                StepToolCall(tool_call_id=f"c{i}", tool_name=n) for i, n in enumerate(tool_calls)
            ),
        ),
        request=make_request(),
    )


# -- LC-001 / LC-002 ------------------------------------------------------------------


async def test_lc_001_sync_and_async_hooks_have_the_same_effect(world: World) -> None:
    """LC-001: def and async def hooks are accepted in every phase with the same effect."""

    def sync_hook(input: PrepareModelStepInput) -> Continue:
        return Continue(patch=ModelStepPatch(instructions="sync"))

    async def async_hook(input: PrepareModelStepInput) -> Continue:
        return Continue(patch=ModelStepPatch(instructions="async"))

    for hook, expected in ((sync_hook, "sync"), (async_hook, "async")):
        result = await compose_lifecycle({"prepare_model_step": hook}).prepare_model_step(
            prepare_step_input(world)
        )
        assert isinstance(result, Continue) and result.patch is not None
        assert result.patch.instructions == expected

    class Sync(AgentLifecycle):
        def before_tool_call(self, input: BeforeToolCallInput) -> ReplaceInput:
            return ReplaceInput({"q": "sync"})

    class Async(AgentLifecycle):
        async def before_tool_call(self, input: BeforeToolCallInput) -> ReplaceInput:
            return ReplaceInput({"q": "sync"})

    assert await compose_lifecycle(Sync()).before_tool_call(
        tool_input(world)
    ) == await compose_lifecycle(Async()).before_tool_call(tool_input(world))


async def test_lc_002_none_means_no_change_in_every_phase(world: World) -> None:
    """LC-002: None continues prepare_run/prepare_model_step/tool hooks and leaves
    after_step's transition to the runtime."""
    nothing = compose_lifecycle(
        {
            "prepare_run": lambda i: None,
            "prepare_model_step": lambda i: None,
            "before_tool_call": lambda i: None,
            "after_tool_result": lambda i: None,
            "after_step": lambda i: None,
        }
    )
    assert await nothing.prepare_run(prepare_run_input(world)) is None
    assert await nothing.prepare_model_step(prepare_step_input(world)) is None
    assert await nothing.before_tool_call(tool_input(world)) is None
    result = ToolResult(status="output-available", source="execute", output=1)
    assert (
        await nothing.after_tool_result(
            AfterToolResultInput(**vars(tool_input(world)), result=result)
        )
        is None
    )
    assert await nothing.after_step(after_step_input(world)) is None


# -- LC-005 / LC-153 / LC-159 ----------------------------------------------------------


async def test_lc_005_lc_153_named_parts_run_left_to_right_in_the_trace(world: World) -> None:
    """LC-005/LC-153, TH-045: non-around hooks run in argument order (extra layers after
    the primary one); the trace names each part."""
    trace = LifecycleTrace()

    class Guard(AgentLifecycle):
        def prepare_run(self, input: PrepareRunInput) -> None:
            return None

    lifecycle = compose_lifecycle(
        Guard(),
        {"name": "rag", "prepare_run": lambda i: None},
        {"prepare_run": lambda i: None},
        trace=trace,
    )
    await lifecycle.prepare_run(prepare_run_input(world))
    assert trace.calls == [
        ("Guard", "prepare_run"),
        ("rag", "prepare_run"),
        ("part2", "prepare_run"),
    ]


async def test_lc_005_a_failure_is_attributed_to_the_named_part(world: World) -> None:
    """LC-005/LC-158: the exception propagates unchanged, annotated with the part's name."""
    trace = LifecycleTrace()

    def boom(input: Any) -> None:
        raise KeyError("quota")

    lifecycle = compose_lifecycle({"name": "quota", "prepare_run": boom}, trace=trace)
    with pytest.raises(KeyError) as caught:
        await lifecycle.prepare_run(prepare_run_input(world))
    assert any("quota" in note for note in caught.value.__notes__)
    assert trace.decisions() == [("quota", "prepare_run", "error")]


async def test_lc_159_composition_is_deterministic(world: World) -> None:
    """LC-159: same parts, same order -> same calls and same result, every time."""
    parts = [
        {
            "name": f"p{i}",
            "prepare_model_step": (
                lambda n: lambda inp: Continue(patch=ModelStepPatch(instructions=f"i{n}"))
            )(i),
        }
        for i in range(4)
    ]
    outcomes = []
    for _ in range(3):
        trace = LifecycleTrace()
        result = await compose_lifecycle(*parts, trace=trace).prepare_model_step(
            prepare_step_input(world)
        )
        outcomes.append((trace.calls, result))
    assert outcomes[0] == outcomes[1] == outcomes[2]


# -- prepare_run (LC-155, LC-156) -----------------------------------------------------


async def test_lc_155_prepare_run_parts_see_the_same_input_and_patches_accumulate(
    world: World,
) -> None:
    """LC-155: every prepare_run part gets the same input; continue patches merge."""
    seen: list[Any] = []

    def a(input: PrepareRunInput) -> Continue:
        seen.append(input)
        return Continue(
            patch=RunPatch(
                model_settings={"temperature": 0.1},
                instructions="a",
                append_model_messages=[{"role": "user", "content": "1"}],
            )
        )

    def b(input: PrepareRunInput) -> Continue:
        seen.append(input)
        return Continue(
            patch=RunPatch(
                model_settings={"seed": 3},
                max_steps=2,
                append_model_messages=[{"role": "user", "content": "2"}],
            )
        )

    run_input = prepare_run_input(world)
    result = await compose_lifecycle({"prepare_run": a}, {"prepare_run": b}).prepare_run(run_input)
    assert seen == [run_input, run_input]
    assert isinstance(result, Continue) and isinstance(result.patch, RunPatch)
    assert dict(result.patch.model_settings or {}) == {"temperature": 0.1, "seed": 3}
    assert result.patch.instructions == "a" and result.patch.max_steps == 2
    assert [m["content"] for m in result.patch.append_model_messages or ()] == ["1", "2"]


@pytest.mark.parametrize(
    "decision", [Respond("cached"), Complete(reason="noop"), Fail(reason="quota")]
)
async def test_lc_156_first_deciding_prepare_run_ends_the_path(world: World, decision: Any) -> None:
    """LC-156: respond/complete/fail from a prepare_run part ends the path."""
    trace = LifecycleTrace()
    lifecycle = compose_lifecycle(
        {"name": "a", "prepare_run": lambda i: Continue(patch=RunPatch(instructions="x"))},
        {"name": "b", "prepare_run": lambda i: decision},
        {"name": "c", "prepare_run": lambda i: Continue()},
        trace=trace,
    )
    assert await lifecycle.prepare_run(prepare_run_input(world)) is decision
    assert trace.calls == [("a", "prepare_run"), ("b", "prepare_run")]


async def test_lc_070_respond_accepts_text_and_defaults_to_completed() -> None:
    """LC-070/LC-071: respond carries an assistant response; outcome defaults to completed."""
    respond = Respond("cached answer")
    assert respond.response.text == "cached answer" and respond.outcome == "completed"
    assert Respond("no", outcome="blocked", reason="policy").outcome == "blocked"


async def test_lc_158_a_result_invalid_for_its_phase_fails(world: World) -> None:
    """LC-158: a decision from the wrong phase is a runtime failure, not ignored."""
    with pytest.raises(LifecycleResultError):
        await compose_lifecycle({"prepare_run": lambda i: Block("x")}).prepare_run(
            prepare_run_input(world)
        )
    with pytest.raises(LifecycleResultError):
        await compose_lifecycle({"before_tool_call": lambda i: Complete()}).before_tool_call(
            tool_input(world)
        )


# -- prepare_model_step (LC-077, LC-154, LC-156) --------------------------------------------


async def test_lc_077_lc_154_each_step_part_sees_the_request_patched_by_earlier_parts(
    world: World,
) -> None:
    """LC-077/LC-154: prepare_model_step input is the effective request after earlier patches."""
    routed = FakeModel("routed")
    seen: list[Any] = []

    def route(input: PrepareModelStepInput) -> Continue:
        return Continue(patch=ModelStepPatch(model=routed, model_settings={"temperature": 0}))

    def observe(input: PrepareModelStepInput) -> Continue:
        seen.append((input.input.model, dict(input.input.model_settings)))
        return Continue(patch=ModelStepPatch(provider_options={"routed": {"cache": True}}))

    request = make_request(settings={"seed": 1})
    result = await compose_lifecycle(
        {"prepare_model_step": route}, {"prepare_model_step": observe}
    ).prepare_model_step(prepare_step_input(world, request))
    assert seen == [(routed, {"temperature": 0})]
    assert isinstance(result, Continue) and result.patch is not None
    final = apply_patch(request, result.patch)
    assert final.model is routed
    assert dict(final.model_settings) == {"temperature": 0}
    assert dict(final.provider_options["routed"]) == {"cache": True}


@pytest.mark.parametrize(
    "decision", [Respond("from cache"), Block("unsafe", response="I can't help")]
)
async def test_lc_156_first_deciding_prepare_model_step_ends_the_path(
    world: World, decision: Any
) -> None:
    """LC-156/LC-082: respond/block end the step path; later parts are not called."""
    trace = LifecycleTrace()
    lifecycle = compose_lifecycle(
        {"name": "a", "prepare_model_step": lambda i: decision},
        {"name": "b", "prepare_model_step": lambda i: None},
        trace=trace,
    )
    assert await lifecycle.prepare_model_step(prepare_step_input(world)) is decision
    assert trace.calls == [("a", "prepare_model_step")]


# -- tool hooks (LC-154, LC-157, LC-134..LC-141) ----------------------------------------------


async def test_lc_154_before_tool_call_passes_the_replaced_input_on(world: World) -> None:
    """LC-154/LC-134: later parts receive the replaced input; the result carries the last."""
    seen: list[Any] = []

    def clamp(input: BeforeToolCallInput) -> ReplaceInput:
        return ReplaceInput({**input.input, "limit": 50})

    def observe(input: BeforeToolCallInput) -> None:
        seen.append(input.input)

    result = await compose_lifecycle(
        {"before_tool_call": clamp}, {"before_tool_call": observe}
    ).before_tool_call(tool_input(world, {"q": "x", "limit": 500}))
    assert seen == [{"q": "x", "limit": 50}]
    assert result == ReplaceInput({"q": "x", "limit": 50})


@pytest.mark.parametrize("decision", [Skip({"cached": True}), Reject("not allowed")])
async def test_lc_157_first_skip_or_reject_decides_the_call(world: World, decision: Any) -> None:
    """LC-157: the first skip/reject decides; later before_tool_call parts are not called."""
    trace = LifecycleTrace()
    lifecycle = compose_lifecycle(
        {"name": "a", "before_tool_call": lambda i: ReplaceInput({"q": "y"})},
        {"name": "b", "before_tool_call": lambda i: decision},
        {"name": "c", "before_tool_call": lambda i: Reject("later")},
        trace=trace,
    )
    assert await lifecycle.before_tool_call(tool_input(world)) is decision
    assert trace.calls == [("a", "before_tool_call"), ("b", "before_tool_call")]


async def test_lc_154_lc_141_after_tool_result_passes_the_replaced_result_on(world: World) -> None:
    """LC-154/LC-141: replace_output / replace_message transform the result for later parts."""
    seen: list[ToolResult] = []

    def redact(input: AfterToolResultInput) -> ReplaceOutput:
        return ReplaceOutput({"text": "[redacted]"})

    def observe(input: AfterToolResultInput) -> ReplaceMessage:
        seen.append(input.result)
        return ReplaceMessage("hidden")

    lifecycle = compose_lifecycle({"after_tool_result": redact}, {"after_tool_result": observe})
    error = ToolResult(status="output-error", source="throw", message="boom")
    result = await lifecycle.after_tool_result(
        AfterToolResultInput(**vars(tool_input(world)), result=error)
    )
    assert seen == [
        ToolResult(status="output-available", source="throw", output={"text": "[redacted]"})
    ]
    assert result == ReplaceMessage("hidden")


async def test_lc_138_tool_result_source_is_kept_through_replacements(world: World) -> None:
    """LC-138: result.source names the origin and survives replacements."""
    from pai_agents.lifecycle import apply_tool_result

    result = ToolResult(status="output-error", source="reject", message="no")
    assert apply_tool_result(result, ReplaceMessage("denied")).source == "reject"
    assert apply_tool_result(result, ReplaceOutput(1)).status == "output-available"


# -- after_step (LC-147, LC-150, LC-155) ----------------------------------------------------


async def test_lc_155_after_step_parts_all_run_and_complete_wins(world: World) -> None:
    """LC-155/LC-147: all after_step parts get the same input; complete beats next_step."""
    trace = LifecycleTrace()
    inputs: list[Any] = []

    def more(input: AfterStepInput) -> NextStep:
        inputs.append(input)
        return NextStep()

    def done(input: AfterStepInput) -> Complete:
        inputs.append(input)
        return Complete(reason="enough")

    step_input = after_step_input(world)
    lifecycle = compose_lifecycle(
        {"name": "more", "after_step": more}, {"name": "done", "after_step": done}, trace=trace
    )
    assert await lifecycle.after_step(step_input) == Complete(reason="enough")
    assert inputs == [step_input, step_input]
    assert trace.calls == [("more", "after_step"), ("done", "after_step")]


async def test_lc_150_after_step_overlay_patches_accumulate_in_order(world: World) -> None:
    """LC-150/LC-155: append/replace patches of several parts combine as if applied in order."""
    a = NextStep(patch=NextStepPatch(append_model_messages=[{"role": "user", "content": "a"}]))
    b = NextStep(patch=NextStepPatch(replace_model_messages=[{"role": "user", "content": "b"}]))
    c = NextStep(patch=NextStepPatch(append_model_messages=[{"role": "user", "content": "c"}]))
    lifecycle = compose_lifecycle(
        {"after_step": lambda i: a}, {"after_step": lambda i: b}, {"after_step": lambda i: c}
    )
    result = await lifecycle.after_step(after_step_input(world))
    assert isinstance(result, NextStep) and result.patch is not None
    assert [m["content"] for m in result.patch.replace_model_messages or ()] == ["b", "c"]


# -- resolve_model_context (LC-040..LC-043) ---------------------------------------------------


def resolver_input(world: World, history: AnchoredHistory) -> ResolveModelContextInput:
    base = world.base()
    base["thread"] = world.facade(resolver=True)
    return ResolveModelContextInput(**base, step=STEP, history=history)


async def test_lc_040_first_part_is_the_outer_resolver(world: World) -> None:
    """LC-040: in compose(a, b), a wraps b: a sees what b returned."""
    for text in ("one", "two", "three"):
        world.user(text)
    history = await AnchoredHistory.anchor(world.facade().messages)
    order: list[str] = []

    async def outer(input: ResolveModelContextInput, next: Any) -> list[Any]:
        order.append("a-in")
        context = await next()
        order.append(f"a-out:{len(context)}")
        return context[-1:]

    async def inner(input: ResolveModelContextInput, next: Any) -> list[Any]:
        order.append("b-in")
        context = await next()
        order.append("b-out")
        return context[-2:]

    lifecycle = compose_lifecycle(
        {"resolve_model_context": outer}, {"resolve_model_context": inner}
    )
    result = await lifecycle.resolve_model_context(
        resolver_input(world, history), history.default_leaf
    )
    assert order == ["a-in", "b-in", "b-out", "a-out:2"]
    assert result == [{"role": "user", "content": [{"type": "text", "text": "three"}]}]


async def test_lc_041_next_is_memoized(world: World) -> None:
    """LC-041: calling next() several times runs the downstream chain once."""
    world.user("hello")
    history = await AnchoredHistory.anchor(world.facade().messages)
    calls = 0

    async def inner(input: Any, next: Any) -> list[Any]:
        nonlocal calls
        calls += 1
        return await next()

    async def outer(input: Any, next: Any) -> list[Any]:
        first, second = await asyncio.gather(next(), next())
        third = await next()
        assert first == second == third
        return third

    lifecycle = compose_lifecycle(
        {"resolve_model_context": outer}, {"resolve_model_context": inner}
    )
    await lifecycle.resolve_model_context(resolver_input(world, history), history.default_leaf)
    assert calls == 1


async def test_lc_042_next_base_replaces_only_the_leaf(world: World) -> None:
    """LC-042: next(base) swaps the leaf while every inner layer still runs on it."""
    world.user("durable")
    history = await AnchoredHistory.anchor(world.facade().messages)
    summary = {"role": "system", "content": "summary"}

    async def compactor(input: Any, next: Any) -> list[Any]:
        return await next(
            [summary, {"role": "user", "content": [{"type": "text", "text": "secret"}]}]
        )

    async def redactor(input: Any, next: Any) -> list[Any]:
        return [
            m if m["role"] == "system" else {**m, "content": [{"type": "text", "text": "[x]"}]}
            for m in await next()
        ]

    lifecycle = compose_lifecycle(
        {"resolve_model_context": compactor}, {"resolve_model_context": redactor}
    )
    result = await lifecycle.resolve_model_context(
        resolver_input(world, history), history.default_leaf
    )
    assert result == [summary, {"role": "user", "content": [{"type": "text", "text": "[x]"}]}]


async def test_lc_043_no_resolver_means_every_context_visible_message_in_order(
    world: World,
) -> None:
    """LC-043: the default leaf (and an empty composition) is the context view, ascending."""
    world.user("a")
    world.assistant("hidden", context=False)
    world.assistant("b")
    history = await AnchoredHistory.anchor(world.facade().messages)
    result = await compose_lifecycle().resolve_model_context(
        resolver_input(world, history), history.default_leaf
    )
    assert [m["content"][0]["text"] for m in result] == ["a", "b"]


# -- around_model_call (LC-090, LC-091, LC-095, LC-096, LC-130) -------------------------------


def provider_for(models_seen: list[Any]) -> Any:
    async def provider(request: Any) -> ModelStepStreamResult:
        models_seen.append(request)
        return await open_model_stream(
            request.model, to_model_request(request, {}), signal=request.signal
        )

    return provider


async def test_lc_090_lc_091_wrappers_first_part_outermost(world: World) -> None:
    """LC-090/LC-091: the first part is outermost; inner wrappers and the provider see the
    patches of outer ones; next() passes the request on unchanged."""
    seen: list[tuple[str, Any]] = []
    trace = LifecycleTrace()

    async def outer(request: Any, next: Any) -> ModelStepStreamResult:
        seen.append(("outer", request.instructions))
        return await next(ModelCallPatch(instructions="from-outer"))

    async def inner(request: Any, next: Any) -> ModelStepStreamResult:
        seen.append(("inner", request.instructions))
        return await next()

    attempts: list[Any] = []
    lifecycle = compose_lifecycle(
        {"name": "outer", "around_model_call": outer},
        {"name": "inner", "around_model_call": inner},
        trace=trace,
    )
    outcome = await run_model_call(lifecycle, make_request(), provider_for(attempts))
    assert seen == [("outer", "Be brief."), ("inner", "from-outer")]
    assert trace.calls == [("outer", "around_model_call"), ("inner", "around_model_call")]
    assert attempts[0].instructions == "from-outer"
    assert outcome.request.instructions == "from-outer"
    assert [p async for p in outcome.result.stream][-1]["type"] == "finish"


async def test_lc_095_setup_errors_raise_from_next_and_can_fall_back(world: World) -> None:
    """LC-095: a provider setup failure raises from next(); the wrapper falls back."""
    broken = FakeModel("broken", fail_setup=ModelError("503"))
    fallback = FakeModel("fallback")

    async def fall_back(request: Any, next: Any) -> ModelStepStreamResult:
        try:
            return await next()
        except ModelError:
            return await next(ModelCallPatch(model=fallback))

    attempts: list[Any] = []
    outcome = await run_model_call(
        compose_lifecycle({"around_model_call": fall_back}),
        make_request(broken),
        provider_for(attempts),
    )
    assert [a.model for a in attempts] == [broken, fallback]
    assert [a.model for a in outcome.attempts] == [fallback]  # only successful attempts count
    assert outcome.request.model is fallback


async def test_lc_095_stream_time_errors_arrive_through_the_stream() -> None:
    """LC-095: an error after the first part is not raised by next()."""

    class Flaky(FakeModel):
        async def stream(self, request: Any, *, signal: Any = None) -> Any:
            yield {"type": "text-start", "id": "t"}
            raise ModelError("mid-stream")

    result = await open_model_stream(Flaky(), to_model_request(make_request(), {}))
    with pytest.raises(ModelError):
        async for _ in result.stream:
            pass


async def test_lc_096_a_wrapper_may_answer_without_calling_next(world: World) -> None:
    """LC-096: a cached stream is the step's output and no provider call happens."""
    cached = [
        {"type": "text-start", "id": "c"},
        {"type": "text-delta", "id": "c", "delta": "cached"},
        {"type": "text-end", "id": "c"},
    ]

    async def cache(request: Any, next: Any) -> ModelStepStreamResult:
        return ModelStepStreamResult(stream=iterate(cached))

    attempts: list[Any] = []
    outcome = await run_model_call(
        compose_lifecycle({"around_model_call": cache}), make_request(), provider_for(attempts)
    )
    assert attempts == []
    assert [p async for p in outcome.result.stream] == cached
    assert outcome.executable_tools == {"search", "lookup", "write"}


async def test_lc_130_unidentified_stream_after_several_attempts_fails_closed(world: World) -> None:
    """LC-130/LC-128: with several attempts and a re-wrapped stream, only tools every attempt
    advertised stay executable."""

    async def race(request: Any, next: Any) -> ModelStepStreamResult:
        a = await next(ModelCallPatch(tools=["search", "lookup"]))
        b = await next(ModelCallPatch(tools=["lookup", "write"]))

        async def merged() -> Any:
            async for part in a.stream:
                yield part
            async for _ in b.stream:
                pass

        return ModelStepStreamResult(stream=merged())

    outcome = await run_model_call(
        compose_lifecycle({"around_model_call": race}), make_request(), provider_for([])
    )
    assert outcome.executable_tools == {"lookup"}
    assert not outcome.may_execute("search")


async def test_lc_128_the_identified_attempt_decides_executable_tools(world: World) -> None:
    """LC-128: a tool omitted by a call patch cannot execute even if the model names it."""

    async def narrow(request: Any, next: Any) -> ModelStepStreamResult:
        return await next(ModelCallPatch(tools=["search"]))

    outcome = await run_model_call(
        compose_lifecycle({"around_model_call": narrow}), make_request(), provider_for([])
    )
    assert outcome.may_execute("search") and not outcome.may_execute("lookup")


async def test_lc_101_the_recorded_attempt_request_is_pruned(world: World) -> None:
    """LC-101: hooks see unpruned messages; the attempt recorded for the step is pruned."""
    old = {
        "role": "assistant",
        "content": [{"type": "reasoning", "text": "r"}, {"type": "text", "text": "a"}],
    }
    user = {"role": "user", "content": [{"type": "text", "text": "q"}]}
    seen: list[Any] = []

    async def observe(request: Any, next: Any) -> ModelStepStreamResult:
        seen.append(request.messages)
        return await next()

    model = FakeModel()
    outcome = await run_model_call(
        compose_lifecycle({"around_model_call": observe}),
        make_request(model, messages=(old, user)),
        provider_for([]),
    )
    assert seen[0][0]["content"][0]["type"] == "reasoning"
    assert outcome.request.messages[0]["content"] == [{"type": "text", "text": "a"}]
    assert model.requests[0].messages[0]["content"] == [{"type": "text", "text": "a"}]


# -- transform_step_stream (LC-110, LC-119) ----------------------------------------------------


def transform_input(world: World, stream: Any) -> TransformStepStreamInput:
    return TransformStepStreamInput(
        **world.base(),
        step=STEP,
        stream=stream,
        input=make_request(),
        ui_data=UiDataWriterImpl({}, lambda c: None),
        abort=abort_step,
    )


async def test_lc_110_transforms_chain_left_to_right(world: World) -> None:
    """LC-110: each transform receives the stream the previous one returned."""

    def suffix(tag: str) -> Any:
        async def transform(input: TransformStepStreamInput) -> Any:
            async def run() -> Any:
                async for part in input.stream:
                    if part["type"] == "text-delta":
                        part = {**part, "delta": part["delta"] + tag}
                    yield part

            return run()

        return transform

    lifecycle = compose_lifecycle(
        {"transform_step_stream": suffix("-a")}, {"transform_step_stream": suffix("-b")}
    )
    stream = await lifecycle.transform_step_stream(
        transform_input(world, iterate([{"type": "text-delta", "id": "t", "delta": "x"}]))
    )
    assert [p["delta"] async for p in stream] == ["x-a-b"]
