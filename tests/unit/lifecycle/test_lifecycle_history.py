"""The step-anchored history (LC-044..LC-048) and the episode overlay (LC-052, LC-074..076,
LC-078, LC-150..LC-152)."""

from __future__ import annotations

from typing import Any

import pytest
from lifecycle_support import FakeModel, World

from pai_agents.abort import AbortSignal
from pai_agents.lifecycle import (
    AnchoredHistory,
    EpisodeState,
    ExecutionInfo,
    LifecycleRun,
    ModelOverlay,
    ModelStepPatch,
    NextStepPatch,
    ResolveModelContextInput,
    RunPatch,
    StepInfo,
    apply_patch,
    compose_lifecycle,
)


def texts(messages: Any) -> list[str]:
    return [m.parts[0]["text"] for m in messages]


async def test_lc_044_through_is_the_newest_physical_message_and_stays_fixed(world: World) -> None:
    """LC-044: through is the newest message at step start (None on an empty thread)."""
    assert (await AnchoredHistory.anchor(world.facade().messages)).through is None
    world.user("a")
    hidden = world.assistant("b", context=False)
    history = await AnchoredHistory.anchor(world.facade().messages)
    world.user("later")
    assert history.through == hidden


async def test_lc_045_collect_follows_pages_and_includes_the_anchor(world: World) -> None:
    """LC-045: collect follows every page (page size 3 here), includes through when it
    matches the view, defaults to context/asc."""
    for i in range(7):
        world.user(f"u{i}")
    world.assistant("last")
    history = await AnchoredHistory.anchor(world.facade().messages)
    assert texts(await history.collect()) == [*(f"u{i}" for i in range(7)), "last"]
    assert texts(await history.collect(order="desc"))[0] == "last"


async def test_lc_045_collect_excludes_an_anchor_outside_the_view(world: World) -> None:
    """LC-045: through is included only when it matches the requested view and range."""
    first = world.user("a")
    world.assistant("hidden", context=False)
    history = await AnchoredHistory.anchor(world.facade().messages)
    assert texts(await history.collect()) == ["a"]
    assert texts(await history.collect(view="all", after_message_id=first.id)) == ["hidden"]


async def test_lc_046_before_pages_are_strictly_older_than_the_anchor(world: World) -> None:
    """LC-046: before() never returns through."""
    world.user("a")
    world.user("b")
    history = await AnchoredHistory.anchor(world.facade().messages)
    page = await history.before(limit=10)
    assert texts(page.items) == ["a"]


async def test_lc_047_messages_appended_after_step_start_never_leak(world: World) -> None:
    """LC-047: including ones the resolver appends itself."""
    world.user("a")
    history = await AnchoredHistory.anchor(world.facade().messages)
    await world.facade(resolver=True).messages.append(
        role="system", parts=[{"type": "text", "text": "own"}]
    )
    world.user("concurrent")
    assert texts(await history.collect(view="all")) == ["a"]
    assert len(await history.model_messages(view="all")) == 1
    assert (await history.before()).items == ()


async def test_lc_048_model_messages_lets_a_resolver_bypass_next(world: World) -> None:
    """LC-048: history.model_messages() is the converted selection; a resolver may return it."""
    world.user("old")
    keep = world.user("recent")
    world.assistant("answer")
    history = await AnchoredHistory.anchor(world.facade().messages)

    async def recent_only(input: ResolveModelContextInput, next: Any) -> Any:
        return await input.history.model_messages(after_message_id=keep.id)

    private, public = world.store.run_metadata_clients(world.lease)
    run = LifecycleRun(
        run_id=world.lease.run_id, thread_id=world.thread_id, initiator="send",
        started_at="t0", execution=ExecutionInfo(operation="send", started_at="t0"),
        private_metadata=private, metadata=public,
    )  # fmt: skip
    resolver_input = ResolveModelContextInput(
        runtime_context=None, run=run, thread=world.facade(resolver=True), signal=AbortSignal(),
        step=StepInfo(step_id="s", index=0), history=history,
    )  # fmt: skip
    result = await compose_lifecycle({"resolve_model_context": recent_only}).resolve_model_context(
        resolver_input, history.default_leaf
    )
    assert result == [{"role": "assistant", "content": [{"type": "text", "text": "answer"}]}]


def test_lc_006_initiator_is_never_resume(world: World) -> None:
    """LC-006/LC-008: initiator names the creating operation; execution.operation may be resume."""
    private, public = world.store.run_metadata_clients(world.lease)
    run = LifecycleRun(
        run_id="r", thread_id="t", initiator="send", started_at="t0",
        execution=ExecutionInfo(operation="resume", started_at="t1"),
        private_metadata=private, metadata=public,
    )  # fmt: skip
    assert run.execution.operation == "resume" and run.started_at != run.execution.started_at
    with pytest.raises(ValueError):
        LifecycleRun(
            run_id="r", thread_id="t", initiator="resume", started_at="t0",  # type: ignore[arg-type]
            execution=ExecutionInfo(operation="resume", started_at="t1"),
            private_metadata=private, metadata=public,
        )  # fmt: skip


def _step(state: EpisodeState, index: int, resolved: list[Any]) -> Any:
    return state.step_request(
        FakeModel(),
        instructions="agent",
        resolved_context=resolved,
        tools=["search", "lookup"],
        run_id="r",
        thread_id="t",
        step_index=index,
        signal=AbortSignal(),
        runtime_context=None,
    )


def test_lc_052_lc_075_run_messages_are_appended_after_the_resolved_context() -> None:
    """LC-052/LC-075: prepare_run append_model_messages follow the resolved base context."""
    note = {"role": "user", "content": [{"type": "text", "text": "model-only"}]}
    state = EpisodeState.start(RunPatch(append_model_messages=[note]), agent_max_steps=10)
    base = [{"role": "user", "content": [{"type": "text", "text": "durable"}]}]
    assert _step(state, 0, base).messages == (*base, note)


def test_lc_074_lc_078_run_defaults_persist_step_patches_do_not() -> None:
    """LC-074/LC-078: each step starts from the episode defaults, not the last step's patch."""
    state = EpisodeState.start(
        RunPatch(instructions="episode", tools=["lookup"]), agent_max_steps=10
    )
    step0 = apply_patch(_step(state, 0, []), ModelStepPatch(instructions="step", tools=["search"]))
    step1 = _step(state, 1, [])
    assert (step0.instructions, step0.tools) == ("step", ("search",))
    assert (step1.instructions, step1.tools) == ("episode", ("lookup",))


def test_lc_076_ad_018_ad_026_run_patch_overrides_the_ceiling_and_skips_resolvers() -> None:
    """LC-076/AD-018/AD-026: max_steps overrides; a model or instructions patch means the
    root resolver / instruction builder are not needed in this episode."""
    assert EpisodeState.start(None, agent_max_steps=10).max_steps == 10
    state = EpisodeState.start(
        RunPatch(max_steps=3, model=FakeModel(), instructions="x"), agent_max_steps=10
    )
    assert state.max_steps == 3
    assert not state.needs_model_resolver and not state.needs_instructions


def test_lc_150_lc_151_overlay_changes_for_later_steps_and_is_discarded() -> None:
    """LC-150/LC-151/LC-152: next_step patches change the overlay of later steps; discard()
    (waiting, steering, completion, cancellation, lease loss) empties it."""
    overlay = ModelOverlay([{"role": "user", "content": "a"}])
    overlay.apply(NextStepPatch(append_model_messages=[{"role": "user", "content": "b"}]))
    assert [m["content"] for m in overlay.extend([])] == ["a", "b"]
    overlay.apply(NextStepPatch(replace_model_messages=[{"role": "user", "content": "c"}]))
    assert [m["content"] for m in overlay.messages] == ["c"]
    overlay.discard()
    assert overlay.messages == ()
