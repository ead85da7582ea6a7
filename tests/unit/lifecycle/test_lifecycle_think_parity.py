"""Package pieces behind peer-parity features: run-level ``output`` and ``send_reasoning``
(TH-016, TH-021), the hidden-reasoning store (TH-016) and extension observers (TH-046,
TH-047). The engine-level behaviour is in tests/unit/engine/test_coming_from_think.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from lifecycle_support import FakeModel, make_request
from pydantic import BaseModel

from pai_agents.lifecycle import (
    LifecyclePatchError,
    ModelCallPatch,
    ModelStepPatch,
    RunPatch,
    StructuredOutputError,
    apply_patch,
    merge_patches,
    observe,
    to_model_request,
    validate_output,
)
from pai_agents.lifecycle.overlay import EpisodeState
from pai_agents.lifecycle.reasoning import HiddenReasoning
from pai_agents.messages.model_messages import to_model_messages


class Verdict(BaseModel):
    severity: str


def test_th_021_output_is_a_run_patch_field_that_removes_every_tool() -> None:
    """TH-021: output sets the response format and empties the tools for good."""
    request = apply_patch(make_request(), RunPatch(output=Verdict, tool_choice="required"))
    assert request.output is Verdict and request.tools == () and request.tool_choice is None
    later = apply_patch(request, ModelStepPatch(tools=["search"]))
    later = apply_patch(later, ModelCallPatch(model=FakeModel("other"), tools=["lookup"]))
    assert later.tools == () and later.output is Verdict
    model_request = to_model_request(later, {})
    assert model_request.tools == []
    assert model_request.response_format == {
        "type": "json",
        "schema": Verdict.model_json_schema(),
        "name": "Verdict",
    }
    assert to_model_request(make_request(), {}).response_format is None
    with pytest.raises(LifecyclePatchError):
        RunPatch(output=dict)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ModelStepPatch(output=Verdict)  # type: ignore[call-arg]


def test_th_021_output_also_removes_provider_tools_for_good() -> None:
    """TH-021: "tools disabled" includes provider tools; a later patch cannot bring one back."""
    request = make_request(provider_tools={"web_search": {"type": "web_search"}})
    assert dict(request.provider_tools)
    request = apply_patch(request, RunPatch(output=Verdict))
    assert not request.provider_tools and not request.declared_provider_tools
    assert to_model_request(request, {}).provider_tools == {}
    with pytest.raises(LifecyclePatchError):
        apply_patch(request, ModelStepPatch(provider_tools={"web_search": {"type": "web_search"}}))


def test_th_016_th_021_run_level_fields_merge_like_other_run_patch_fields() -> None:
    """TH-016, TH-021: composed prepare_run patches merge send_reasoning and output."""
    merged = merge_patches(RunPatch(send_reasoning=False), RunPatch(output=Verdict))
    assert merged is not None
    assert (merged.send_reasoning, merged.output) == (False, Verdict)
    assert EpisodeState.start(merged, agent_max_steps=3).send_reasoning is False
    assert EpisodeState.start(RunPatch(), agent_max_steps=3).send_reasoning is True
    assert EpisodeState.start(None, agent_max_steps=3).send_reasoning is True


def test_th_021_validate_output_parses_or_raises_a_typed_error() -> None:
    """TH-021: the joined text parts must be valid JSON for the schema."""
    message = {
        "parts": [{"type": "text", "text": '{"severity": '}, {"type": "text", "text": '"low"}'}]
    }
    assert validate_output(Verdict, message) == Verdict(severity="low")
    with pytest.raises(StructuredOutputError) as caught:
        validate_output(Verdict, {"parts": [{"type": "text", "text": "low"}]})
    assert caught.value.schema == "Verdict" and caught.value.text == "low"


def test_th_016_hidden_reasoning_is_restored_where_it_streamed() -> None:
    """TH-016: restored parts sit at their stream positions and convert like stored ones."""
    hidden = HiddenReasoning()
    message: dict[str, Any] = {"id": "m1", "role": "assistant", "parts": [{"type": "step-start"}]}
    for part in (
        {"type": "reasoning-start", "id": "r1"},
        {"type": "reasoning-delta", "id": "r1", "delta": "think "},
        {"type": "reasoning-delta", "id": "r1", "delta": "hard"},
        {"type": "reasoning-end", "id": "r1"},
    ):
        assert hidden.take(part, message)  # type: ignore[arg-type]
    assert not hidden.take({"type": "text-delta", "id": "t", "delta": "x"}, message)  # type: ignore[arg-type]
    message["parts"].append({"type": "text", "text": "answer", "state": "done"})
    assert hidden.take({"type": "reasoning-start", "id": "r2"}, message)  # type: ignore[arg-type]
    assert hidden.take({"type": "reasoning-delta", "id": "r2", "delta": "cut"}, message)  # type: ignore[arg-type]
    other = {"id": "m0", "role": "user", "parts": [{"type": "text", "text": "q"}]}
    restored = hidden.restore([other, message])  # type: ignore[list-item]
    assert restored[0] is other and message["parts"][1]["type"] == "text"  # input unchanged
    assert [p["type"] for p in restored[1]["parts"]] == [
        "step-start",
        "reasoning",
        "text",
        "reasoning",
    ]
    assert restored[1]["parts"][1] == {
        "type": "reasoning",
        "id": "r1",
        "text": "think hard",
        "state": "done",
    }
    assert restored[1]["parts"][3]["state"] == "done"  # a cut-off part is settled
    content = to_model_messages(restored)[1]["content"]
    assert content[0] == {"type": "reasoning", "text": "think hard"}


def test_th_046_observe_checks_the_extension_at_definition_time() -> None:
    """TH-046: unknown hook names and non-callables are errors when the agent is defined."""
    with pytest.raises(TypeError, match="unknown extension hooks"):
        observe({"beforeTurn": lambda s: None})
    with pytest.raises(TypeError, match="implements no extension hook"):
        observe(object())
    with pytest.raises(TypeError, match="not callable"):
        observe({"on_chunk": 1})
    part = observe({"on_chunk": lambda s: None, "after_tool_call": lambda s: None})
    assert part.name == "extension"
    assert set(part._phases) == {"transform_step_stream", "after_tool_result"}


class _Ext:
    name = "named"

    def before_turn(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        return {"temperature": 0.1, "toolChoice": "none", "activeTools": ["search"], "topK": 3}


def test_th_047_before_turn_config_maps_to_a_step_patch() -> None:
    """TH-047: the scalar TurnConfig keys become one step patch; others are ignored."""
    part = observe(_Ext())
    assert part.name == "named"
    run = type("Run", (), {"run_id": "r"})()
    config = {"temperature": 0.1, "toolChoice": "none", "activeTools": ["search"]}
    config |= {"maxSteps": 2, "seed": True, "headers": {"a": "b"}, "system": "S"}
    patch, max_steps = part._config(config, run)  # type: ignore[arg-type]
    assert patch == ModelStepPatch(
        instructions="S", tool_choice="none", tools=["search"], model_settings={"temperature": 0.1}
    )
    assert max_steps == 2
    assert part._config(None, run) == (None, None)  # type: ignore[arg-type]
    assert part._config(["x"], run) == (None, None)  # type: ignore[arg-type]
