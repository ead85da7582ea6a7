"""AD-021: model settings are an allowlist, for the agent's ModelSelection as for patches;
snake_case spellings in a patch are mapped, unknown snake_case names are refused."""

from __future__ import annotations

from typing import Any

import pytest

from pai_agents import ScriptedModel, ScriptedStep
from pai_agents.lifecycle import Continue, ModelStepPatch, RunPatch
from pai_agents.lifecycle.patches import LifecyclePatchError, merge_model_settings
from pai_agents.models.base import ModelSelection
from tests.support.engine_harness import harness


async def test_ad_021_selection_settings_outside_the_allowlist_never_reach_the_provider() -> None:
    """AD-021: headers, maxRetries and abortSignal on ModelSelection.settings used to reach
    ModelRequest.settings (only patches were filtered)."""
    model = ScriptedModel(steps=[ScriptedStep.reply("ok")])
    settings: Any = {
        "temperature": 0.3,
        "headers": {"authorization": "secret"},
        "maxRetries": 5,
        "abortSignal": object(),
        "timeout": 3,
    }
    h = harness(model=ModelSelection(model=model, settings=settings))
    assert (await h.run()).status == "completed"
    [request] = model.requests
    assert request.settings == {"temperature": 0.3}


async def test_ad_021_snake_case_patch_settings_are_mapped_to_the_wire_names() -> None:
    """AD-021: ``max_output_tokens`` and ``top_p`` in a patch reach the provider as
    ``maxOutputTokens`` and ``topP`` (they used to be dropped silently)."""
    model = ScriptedModel(steps=[ScriptedStep.reply("ok")])
    h = harness(
        model=model,
        parts=[
            {
                "prepare_run": lambda i: Continue(
                    patch=RunPatch(model_settings={"max_output_tokens": 64})
                ),
                "prepare_model_step": lambda i: Continue(
                    patch=ModelStepPatch(model_settings={"top_p": 0.5, "stop_sequences": ["x"]})
                ),
            }
        ],
    )
    assert (await h.run()).status == "completed"
    [request] = model.requests
    assert request.settings == {"maxOutputTokens": 64, "topP": 0.5, "stopSequences": ["x"]}


def test_ad_021_unknown_snake_case_or_doubled_settings_are_refused() -> None:
    """AD-021: a snake_case name outside the allowlist (a typo, or retries, which are the
    patch's ``max_retries``) raises instead of vanishing; so does one setting spelled twice."""
    with pytest.raises(LifecyclePatchError, match="max_retries"):
        merge_model_settings({}, {"max_retries": 3})
    with pytest.raises(LifecyclePatchError, match="max_tokens"):
        merge_model_settings({}, {"max_tokens": 3})
    with pytest.raises(LifecyclePatchError, match="twice"):
        merge_model_settings({}, {"maxOutputTokens": 3, "max_output_tokens": 4})
    assert merge_model_settings({}, {"headers": {"x": "1"}, "maxRetries": 0}) == {}
