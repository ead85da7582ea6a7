"""Model configuration order and merge rules (LC-083..LC-089), request immutability and
patch hygiene (LC-092, LC-093, LC-129), reasoning pruning before an attempt (LC-097..102)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from lifecycle_support import FakeModel, make_request

from pai_agents.lifecycle import (
    LifecyclePatchError,
    ModelCallPatch,
    ModelStepPatch,
    RunPatch,
    apply_patch,
    merge_patches,
    prune_request,
    resolve_model_call,
    to_model_request,
)
from pai_agents.models.base import ModelSelection


def test_lc_083_layers_apply_in_order_later_wins() -> None:
    """LC-083: agent selection -> prepare_run -> prepare_model_step (l->r) -> around (o->i)."""
    agent, run_m, step_m, call_m = (
        FakeModel("agent"),
        FakeModel("run"),
        FakeModel("s"),
        FakeModel("c"),
    )
    base = make_request(agent, settings={"temperature": 0.1})
    layers = [
        RunPatch(model=run_m, instructions="run"),
        ModelStepPatch(instructions="step-1"),
        ModelStepPatch(model=step_m),
        ModelCallPatch(instructions="call-outer"),
        ModelCallPatch(model=call_m, instructions="call-inner"),
    ]
    resolved = resolve_model_call(base, *layers)
    assert resolved.model is call_m
    assert resolved.instructions == "call-inner"
    assert resolve_model_call(base, *layers[:3]).model is step_m
    assert resolve_model_call(base, *layers[:2]).instructions == "step-1"
    assert resolve_model_call(base).model is agent


def test_lc_083_resolve_accepts_a_model_selection() -> None:
    """LC-083: the first layer may be the agent's ModelSelection itself."""
    model = FakeModel()
    selection = ModelSelection(model=model, settings={"seed": 1}, provider_options={"p": {"a": 1}})
    resolved = resolve_model_call(selection, ModelStepPatch(model_settings={"temperature": 0.5}))
    assert resolved.model is model
    assert dict(resolved.model_settings) == {"seed": 1, "temperature": 0.5}
    assert {k: dict(v) for k, v in resolved.provider_options.items()} == {"p": {"a": 1}}


def test_lc_084_model_settings_merge_field_by_field() -> None:
    """LC-084: later settings merge key by key; None removes a key."""
    base = make_request(settings={"temperature": 0.1, "topP": 0.9, "seed": 3})
    resolved = resolve_model_call(
        base,
        RunPatch(model_settings={"temperature": 0.5}),
        ModelStepPatch(model_settings={"maxOutputTokens": 100, "seed": None}),
    )
    assert dict(resolved.model_settings) == {
        "temperature": 0.5,
        "topP": 0.9,
        "maxOutputTokens": 100,
    }


def test_lc_084_ad_021_settings_outside_the_allowlist_are_never_forwarded() -> None:
    """LC-084/AD-021: headers, retries and timeouts in a settings patch are dropped."""
    resolved = resolve_model_call(
        make_request(),
        RunPatch(model_settings={"temperature": 0.2, "headers": {"x": "1"}, "maxRetries": 0}),
    )
    assert dict(resolved.model_settings) == {"temperature": 0.2}
    assert to_model_request(resolved, {}).settings == {"temperature": 0.2}


def test_lc_085_provider_options_merge_by_provider_key_only() -> None:
    """LC-085: a later entry replaces that provider's whole dict; other providers stay."""
    base = make_request(provider_options={"openai": {"a": 1, "b": 2}, "anthropic": {"c": 3}})
    resolved = resolve_model_call(base, ModelStepPatch(provider_options={"openai": {"b": 9}}))
    assert {k: dict(v) for k, v in resolved.provider_options.items()} == {
        "openai": {"b": 9},
        "anthropic": {"c": 3},
    }


def test_lc_086_provider_tools_and_tool_choice_replace_whole() -> None:
    """LC-086: provider tools and tool choice are replaced, never merged."""
    search = {"type": "provider", "id": "google.search"}
    code = {"type": "provider", "id": "google.code"}
    base = make_request(provider_tools={"google_search": search, "code": code})
    first = apply_patch(base, RunPatch(tool_choice={"type": "tool", "toolName": "search"}))
    second = apply_patch(first, ModelStepPatch(tool_choice="none", provider_tools={"code": code}))
    assert second.tool_choice == "none"
    assert dict(second.provider_tools) == {"code": code}


def test_lc_086_ad_072_provider_tool_patches_select_declared_definitions_only() -> None:
    """LC-086/AD-072: an undeclared provider tool, or a changed definition, is rejected."""
    search = {"type": "provider", "id": "google.search"}
    base = make_request(provider_tools={"google_search": search})
    with pytest.raises(LifecyclePatchError):
        apply_patch(base, ModelStepPatch(provider_tools={"other": search}))
    with pytest.raises(LifecyclePatchError):
        apply_patch(base, ModelStepPatch(provider_tools={"google_search": {"id": "x"}}))


def test_lc_087_instructions_replace_whole_lists_never_concatenate() -> None:
    """LC-087: a later list of system messages replaces the earlier one."""
    first = [{"role": "system", "content": "a"}, {"role": "system", "content": "b"}]
    second = [{"role": "system", "content": "c"}]
    resolved = resolve_model_call(
        make_request(), RunPatch(instructions=first), ModelStepPatch(instructions=second)
    )
    assert resolved.instructions == second
    request = to_model_request(resolved, {})
    assert request.system is None
    assert request.messages[0] == {"role": "system", "content": "c"}


def test_lc_088_step_and_call_instructions_do_not_carry_into_the_next_step() -> None:
    """LC-088, TH-028: each step starts from the episode default (prepare_run), not the
    last step: step instructions apply to one step."""
    run_patch = RunPatch(instructions="episode")
    step0 = resolve_model_call(
        make_request(step_index=0), run_patch, ModelStepPatch(instructions="step0")
    )
    step1 = resolve_model_call(make_request(step_index=1), run_patch)
    assert step0.instructions == "step0"
    assert step1.instructions == "episode"


@pytest.mark.parametrize("layer", [RunPatch, ModelStepPatch, ModelCallPatch])
def test_lc_089_a_model_patch_starts_a_fresh_route(layer: type) -> None:
    """LC-089: supplying model (even the same object) clears settings, options, provider
    tools and tool choice, then applies the patch's own; PAI tools and instructions stay."""
    model = FakeModel()
    search = {"id": "s"}
    base = make_request(
        model,
        settings={"temperature": 0.1},
        provider_options={"openai": {"x": 1}},
        provider_tools={"google_search": search},
    )
    base = apply_patch(base, RunPatch(tool_choice="required", tools=["search"]))
    resolved = apply_patch(base, layer(model=model, model_settings={"seed": 7}))
    assert resolved.model is model
    assert dict(resolved.model_settings) == {"seed": 7}
    assert dict(resolved.provider_options) == {}
    assert dict(resolved.provider_tools) == {}
    assert resolved.tool_choice is None
    assert resolved.tools == ("search",)
    assert resolved.instructions == "Be brief."


def test_lc_092_the_request_is_read_only_at_the_top_level() -> None:
    """LC-092: assigning a request field raises; nested values are plain data."""
    request = make_request()
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.model = FakeModel()  # type: ignore[misc]
    with pytest.raises(TypeError):
        request.model_settings["temperature"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        request.provider_options["x"] = {}  # type: ignore[index]


def test_lc_093_patches_reject_runtime_owned_fields() -> None:
    """LC-093: passing the request, or a mapping spreading it, into a patch fails."""
    request = make_request()
    with pytest.raises(LifecyclePatchError):
        apply_patch(request, request)
    with pytest.raises(LifecyclePatchError, match="runtime-owned"):
        apply_patch(request, {"run_id": "other", "instructions": "x"})
    with pytest.raises(LifecyclePatchError, match="runtime-owned"):
        apply_patch(
            request, {f.name: getattr(request, f.name) for f in dataclasses.fields(request)}
        )
    with pytest.raises(TypeError):
        ModelCallPatch(step_index=3)  # type: ignore[call-arg]
    assert apply_patch(request, {"instructions": "x"}).instructions == "x"


def test_lc_128_a_tool_patch_only_narrows_to_available_tools() -> None:
    """LC-128/AD-057: the patched tool list is authoritative and cannot add a tool that is
    not available (registered and enabled) this step."""
    request = make_request(tools=("search", "lookup"))
    resolved = apply_patch(request, RunPatch(tools=["lookup", "forged", "lookup"]))
    assert resolved.tools == ("lookup",)
    assert [
        t["name"]
        for t in to_model_request(
            resolved,
            {
                "search": {"name": "search", "inputSchema": {}},
                "lookup": {"name": "lookup", "inputSchema": {}},
            },
        ).tools
    ] == ["lookup"]


def test_lc_129_tool_list_is_snapshotted_when_the_patch_is_built() -> None:
    """LC-129: mutating the list a patch was made from changes nothing afterwards."""
    names = ["search"]
    patch = ModelCallPatch(tools=names)
    request = apply_patch(make_request(), patch)
    names.append("lookup")
    assert request.tools == ("search",)
    assert patch.tools == ("search",)


def test_lc_074_run_patch_max_steps_must_be_positive() -> None:
    """LC-076: max_steps overrides the ceiling; a non-positive value is a malformed patch."""
    with pytest.raises(LifecyclePatchError):
        RunPatch(max_steps=0)


def _patches() -> list[ModelStepPatch]:
    m1, m2 = FakeModel("m1"), FakeModel("m2")
    return [
        ModelStepPatch(model_settings={"temperature": 0.3, "seed": None}),
        ModelStepPatch(model=m1, provider_options={"a": {"x": 1}}),
        ModelStepPatch(provider_options={"b": {"y": 2}}, tool_choice="none"),
        ModelStepPatch(model=m2, tools=["search"]),
        ModelStepPatch(
            messages=[{"role": "user", "content": []}],
            append_model_messages=[{"role": "user", "content": [{"type": "text", "text": "z"}]}],
        ),
        ModelStepPatch(
            append_model_messages=[{"role": "user", "content": [{"type": "text", "text": "more"}]}]
        ),
        ModelStepPatch(instructions="i"),
    ]


def test_lc_155_merged_patches_equal_sequential_application() -> None:
    """LC-155/LC-154: merging two patches gives exactly what applying both in order gives."""
    base = make_request(settings={"seed": 1, "topK": 2}, provider_options={"a": {"q": 0}})
    for first, second in itertools.product(_patches(), repeat=2):
        merged = merge_patches(first, second)
        assert resolve_model_call(base, merged) == resolve_model_call(base, first, second)


def test_lc_097_lc_099_reasoning_is_pruned_before_the_latest_user_message_only() -> None:
    """LC-097/LC-098/LC-100: reasoning before the latest user message goes, emptied messages
    are dropped, the current turn keeps its reasoning; LC-099: no user message, no pruning."""
    old = {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "r0"},
            {"type": "text", "text": "a0", "providerOptions": {"p": {"k": 1}}},
        ],
    }
    only_reasoning = {"role": "assistant", "content": [{"type": "reasoning", "text": "r1"}]}
    user = {"role": "user", "content": [{"type": "text", "text": "q"}]}
    current = {"role": "assistant", "content": [{"type": "reasoning", "text": "r2"}]}
    request = make_request(messages=(old, only_reasoning, user, current))
    pruned = prune_request(request)
    assert pruned.messages == (
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "a0", "providerOptions": {"p": {"k": 1}}}],
        },
        user,
        current,
    )
    no_user = make_request(messages=(old, only_reasoning))
    assert prune_request(no_user).messages == no_user.messages


def test_lc_101_lc_102_pruning_leaves_the_unpruned_request_untouched() -> None:
    """LC-101/LC-102: hooks keep the unpruned request; pruning copies."""
    old = {
        "role": "assistant",
        "content": [{"type": "reasoning", "text": "r0"}, {"type": "text", "text": "a"}],
    }
    user = {"role": "user", "content": [{"type": "text", "text": "q"}]}
    request = make_request(messages=(old, user))
    prune_request(request)
    assert request.messages[0]["content"][0]["type"] == "reasoning"
