"""Streams, aborts and signals (LC-010, LC-094, LC-103, LC-111, LC-116..LC-119), history
rewrite hooks (LC-057..LC-063), stop conditions and the run-finished observer (TH-015,
TH-041)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lifecycle_support import World, make_request

from pai_agents.abort import AbortSignal
from pai_agents.lifecycle import (
    AfterStepInfo,
    AfterStepInput,
    AssistantResponse,
    Complete,
    HistoryRewritePatch,
    HistoryRewrittenInput,
    LifecycleMessage,
    LifecycleTrace,
    MessageVisibility,
    ModelCallPatch,
    NextStep,
    PrepareHistoryRewriteInput,
    PrepareRunInput,
    RegenerateRewrite,
    RunFinishedInput,
    StepAborted,
    StepInfo,
    StepToolCall,
    TransformStepStreamInput,
    UiDataWriterImpl,
    VisibilityChange,
    VisibilityRewrite,
    abort_step,
    apply_patch,
    combine_signals,
    compose_lifecycle,
    has_tool_call,
    step_count_is,
    stop_when,
    synthetic_step_stream,
)
from pai_agents.lifecycle.streams import iterate

STEP = StepInfo(step_id="s", index=0)


def transform_input(world: World, stream: Any) -> TransformStepStreamInput:
    return TransformStepStreamInput(
        **world.base(), step=STEP, stream=stream, input=make_request(),
        ui_data=UiDataWriterImpl({}, lambda c: None), abort=abort_step,
    )  # fmt: skip


def redactor(input: TransformStepStreamInput) -> Any:
    async def run() -> Any:
        async for part in input.stream:
            if part["type"] == "text-delta":
                part = {**part, "delta": part["delta"].replace("secret", "[redacted]")}
            yield part

    return run()


def test_lc_094_an_attempt_signal_is_combined_with_the_run_signal() -> None:
    """LC-094: either signal aborts the attempt; stop/cancel still reaches the provider."""
    run_signal, timeout = AbortSignal(), AbortSignal()
    combined = combine_signals(run_signal, timeout)
    timeout.abort("timeout")
    assert combined.aborted and combined.reason == "timeout"
    request = make_request()
    patched = apply_patch(request, ModelCallPatch(signal=AbortSignal()))
    assert patched.signal is not request.signal
    request.signal.abort("cancelled")
    assert patched.signal.aborted and patched.signal.reason == "cancelled"


async def test_lc_010_hooks_observe_the_run_signal_while_running(world: World) -> None:
    """LC-010: cancelling the run sets the signal a running hook holds."""
    base = world.base()
    signal: AbortSignal = base["signal"]

    async def waiting(input: Any) -> None:
        await input.signal.wait()

    task = asyncio.ensure_future(
        compose_lifecycle({"prepare_run": waiting}).prepare_run(PrepareRunInput(**base))
    )
    await asyncio.sleep(0)
    signal.abort("cancelled")
    assert await asyncio.wait_for(task, 1) is None


async def test_lc_103_synthetic_text_chunks_all_carry_an_id() -> None:
    """LC-103: text synthesized from a lifecycle response has ids on start, delta and end."""
    parts = [p async for p in synthetic_step_stream(AssistantResponse(text="hello"))]
    text = [p for p in parts if p["type"].startswith("text-")]
    assert [p["type"] for p in text] == ["text-start", "text-delta", "text-end"]
    assert len({p["id"] for p in text}) == 1 and text[0]["id"]
    assert parts[-1]["type"] == "finish"


async def test_lc_111_hook_responses_pass_through_the_canonical_transform(world: World) -> None:
    """LC-111: a respond/block response, as a synthetic stream, is redacted like model output."""
    lifecycle = compose_lifecycle({"transform_step_stream": redactor})
    stream = synthetic_step_stream(AssistantResponse(text="the secret is 42"))
    out = await lifecycle.transform_step_stream(transform_input(world, stream))
    assert [p["delta"] async for p in out if p["type"] == "text-delta"] == ["the [redacted] is 42"]


async def test_lc_116_lc_117_abort_is_a_structured_policy_stop(world: World) -> None:
    """LC-116/LC-117: abort() raises StepAborted (default outcome blocked) with an optional
    replacement; it is not a runtime failure."""
    trace = LifecycleTrace()

    def guard(input: TransformStepStreamInput) -> Any:
        async def run() -> Any:
            async for part in input.stream:
                if "forbidden" in part.get("delta", ""):
                    await input.abort("output_policy", replacement="I can't share that.")
                yield part

        return run()

    lifecycle = compose_lifecycle({"name": "guard", "transform_step_stream": guard}, trace=trace)
    stream = await lifecycle.transform_step_stream(
        transform_input(world, iterate([{"type": "text-delta", "id": "t", "delta": "forbidden"}]))
    )
    with pytest.raises(StepAborted) as caught:
        async for _ in stream:
            pass
    assert caught.value.reason == "output_policy" and caught.value.outcome == "blocked"
    assert caught.value.replacement == AssistantResponse(text="I can't share that.")


async def test_lc_118_abort_may_fail_the_run(world: World) -> None:
    """LC-118: abort(outcome="failed") carries a failed outcome."""
    with pytest.raises(StepAborted) as caught:
        await abort_step("provider_garbage", outcome="failed", message="diagnostic")
    assert caught.value.outcome == "failed" and caught.value.message == "diagnostic"
    with pytest.raises(ValueError):
        StepAborted("x", outcome="completed")  # type: ignore[arg-type]


async def test_lc_119_raising_from_a_transform_is_a_runtime_failure(world: World) -> None:
    """LC-119: an ordinary exception is not a StepAborted; the trace marks it as an error."""
    trace = LifecycleTrace()

    def broken(input: TransformStepStreamInput) -> Any:
        raise RuntimeError("bug")

    lifecycle = compose_lifecycle({"name": "broken", "transform_step_stream": broken}, trace=trace)
    with pytest.raises(RuntimeError):
        await lifecycle.transform_step_stream(transform_input(world, iterate([])))
    assert trace.decisions() == [("broken", "transform_step_stream", "error")]


def after_step_input(world: World, index: int, tools: tuple[str, ...]) -> AfterStepInput:
    message = LifecycleMessage(id="m", role="assistant", parts=())
    calls = tuple(StepToolCall(tool_call_id=str(i), tool_name=n) for i, n in enumerate(tools))
    return AfterStepInput(
        **world.base(),
        step=AfterStepInfo(
            step_id="s", index=index, message=message, finish_reason="tool-calls",
            tool_calls=calls,
        ),
        request=make_request(),
    )  # fmt: skip


async def test_th_015_stop_conditions_complete_the_run(world: World) -> None:
    """TH-015: stop_when(has_tool_call(...), step_count_is(n)) completes when either holds,
    composed with other after_step parts."""
    lifecycle = compose_lifecycle(
        {"after_step": lambda i: NextStep()},
        stop_when(has_tool_call("final_answer"), step_count_is(3)),
    )
    assert await lifecycle.after_step(after_step_input(world, 0, ("search",))) == NextStep()
    done = await lifecycle.after_step(after_step_input(world, 0, ("final_answer",)))
    assert isinstance(done, Complete) and "final_answer" in (done.reason or "")
    assert isinstance(await lifecycle.after_step(after_step_input(world, 2, ())), Complete)


async def test_th_041_run_finished_observers_all_run_and_failures_are_reported(
    world: World,
) -> None:
    """TH-041/LC-063: every run_finished observer runs; failures re-raise afterwards."""
    seen: list[str] = []

    def ok(input: RunFinishedInput) -> None:
        seen.append(f"ok:{input.status}")

    def bad(input: RunFinishedInput) -> None:
        seen.append("bad")
        raise RuntimeError("observer bug")

    finished = RunFinishedInput(
        run_id="r", thread_id="t", status="aborted", run_status="cancelled", message=None,
        continuation=False,
    )  # fmt: skip
    lifecycle = compose_lifecycle({"run_finished": bad}, {"run_finished": ok})
    with pytest.raises(RuntimeError):
        await lifecycle.run_finished(finished)
    assert seen == ["bad", "ok:aborted"]
    with pytest.raises(ExceptionGroup):
        await compose_lifecycle({"run_finished": bad}, {"run_finished": bad}).run_finished(finished)


def rewrite_input(rewrite: Any) -> PrepareHistoryRewriteInput:
    return PrepareHistoryRewriteInput(
        runtime_context=None, thread_id="t", rewrite=rewrite, version=7,
        private_metadata={"cursor": "m1"}, metadata={}, signal=AbortSignal(),
    )  # fmt: skip


async def test_lc_057_lc_060_history_rewrite_patches_accumulate() -> None:
    """LC-057/LC-058/LC-060: each part sees the rewrite, version and bags; their sparse
    patches combine (later keys win) into the one committed with the rewrite."""
    rewrite = RegenerateRewrite(
        target_message_id="m3", retained_message_ids=("m1", "m2"), removed_message_ids=("m3",),
        before_version=7,
    )  # fmt: skip
    seen: list[Any] = []

    def a(input: PrepareHistoryRewriteInput) -> HistoryRewritePatch:
        seen.append((input.rewrite.kind, input.version, input.private_metadata))
        return HistoryRewritePatch(private_metadata={"cursor": None, "stack": []})

    def b(input: PrepareHistoryRewriteInput) -> HistoryRewritePatch:
        return HistoryRewritePatch(
            private_metadata={"stack": ["m1"]}, metadata={"compacted": False}
        )

    patch = await compose_lifecycle(
        {"prepare_history_rewrite": a}, {"prepare_history_rewrite": b}
    ).prepare_history_rewrite(rewrite_input(rewrite))
    assert seen == [("regenerate", 7, {"cursor": "m1"})]
    assert patch == HistoryRewritePatch(
        private_metadata={"cursor": None, "stack": ["m1"]}, metadata={"compacted": False}
    )


def test_lc_059_a_visibility_rewrite_lists_complete_before_and_after() -> None:
    """LC-059: one entry per changed message with both visibility keys."""
    change = VisibilityChange(
        message_id="m1", before=MessageVisibility(), after=MessageVisibility(context=False)
    )
    rewrite = VisibilityRewrite(changes=(change,), before_version=3)
    assert rewrite.kind == "visibility"
    assert (rewrite.changes[0].after.transcript, rewrite.changes[0].after.context) == (True, False)


async def test_lc_063_history_rewritten_failures_do_not_stop_other_observers() -> None:
    """LC-062/LC-063: every history_rewritten part runs; a failure is re-raised for reporting."""
    seen: list[int | None] = []

    def record(input: HistoryRewrittenInput) -> None:
        seen.append(input.rewrite.after_version)

    def boom(input: HistoryRewrittenInput) -> None:
        raise RuntimeError("outbox down")

    rewrite = RegenerateRewrite(
        target_message_id="m", retained_message_ids=(), removed_message_ids=(), before_version=1,
        after_version=2,
    )  # fmt: skip
    event = HistoryRewrittenInput(
        runtime_context=None, thread_id="t", rewrite=rewrite, signal=AbortSignal()
    )
    with pytest.raises(RuntimeError):
        await compose_lifecycle(
            {"history_rewritten": boom}, {"history_rewritten": record}
        ).history_rewritten(event)
    assert seen == [2]
