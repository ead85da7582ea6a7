"""Reasoning summaries without Django or the engine (AD-007, AD-052..AD-054): the
``reasoning_summary`` option checked at definition time, and the generator call (custom or
default) on scripted models. The engine side is tests/unit/engine/test_reasoning_summary.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pai_agents import (
    AgentDefinitionError,
    ModelRequest,
    ModelSelection,
    ReasoningSummary,
    ReasoningSummaryInput,
    ScriptedModel,
    ScriptedStep,
    define_agent,
)
from pai_agents.reasoning_summary import (
    DEFAULT_REASONING_SUMMARY_INSTRUCTIONS,
    MAX_SUMMARY_LENGTH,
    clean_summary,
    generate_reasoning_summary,
)

pytestmark = pytest.mark.filterwarnings("error")


def _agent(reasoning_summary: Any = None, model: Any = None, **options: Any) -> Any:
    return define_agent(
        "summarized",
        instructions="Help.",
        model=model or ScriptedModel(steps=[]),
        reasoning_summary=reasoning_summary,
        **options,
    )


def _input(**overrides: Any) -> ReasoningSummaryInput:
    values: dict[str, Any] = {
        "thread_id": "thr_1",
        "run_id": "run_1",
        "message_id": "msg_1",
        "reasoning_ordinal": 1,
        "reasoning": "The user wants a sum, so add 2 and 3.",
        "operation": "send",
        "started_at": "2026-01-01T12:00:00+00:00",
        "identity": {"userId": "u1"},
        "client_data": {},
        "runtime_context": {"tenant": "t1"},
    }
    return ReasoningSummaryInput(**{**values, **overrides})


def _generate(agent: Any, selected: Any, summary_input: ReasoningSummaryInput | None = None) -> Any:
    return asyncio.run(
        generate_reasoning_summary(
            agent, agent.reasoning_summary, summary_input or _input(), selected=selected
        )
    )


# ---------------------------------------------------------------------------


def test_ad_007_reasoning_summary_is_off_unless_configured() -> None:
    assert _agent().reasoning_summary is None
    assert _agent(False).reasoning_summary is None
    assert _agent().manifest()["reasoningSummary"] is False


def test_ad_007_true_selects_the_default_summarizer() -> None:
    config = _agent(True).reasoning_summary
    assert config == ReasoningSummary()
    assert (config.model, config.instructions, config.generator) == (None, None, None)
    assert _agent(True).manifest()["reasoningSummary"] is True


@pytest.mark.parametrize("value", ["yes", 1, {"model": None}])
def test_ad_007_other_values_are_refused_at_definition_time(value: Any) -> None:
    with pytest.raises(AgentDefinitionError, match="reasoning_summary"):
        _agent(value)


def test_ad_007_the_option_leaves_the_default_version_alone() -> None:
    assert _agent(True).version == _agent().version


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"generator": "not callable"}, "generator"),
        ({"model": "gpt"}, "model"),
        ({"instructions": [{"role": "user", "content": "no"}]}, "system messages"),
    ],
)
def test_ad_007_malformed_options_are_refused(options: dict[str, Any], match: str) -> None:
    with pytest.raises(AgentDefinitionError, match=match):
        ReasoningSummary(**options)


# ---------------------------------------------------------------------------


def test_ad_052_the_input_carries_the_run_facts() -> None:
    summary_input = _input()
    assert (summary_input.reasoning_ordinal, summary_input.operation) == (1, "send")
    assert summary_input.reasoning.startswith("The user wants")
    assert (summary_input.message_id, summary_input.run_id, summary_input.thread_id) == (
        "msg_1",
        "run_1",
        "thr_1",
    )
    behavior = summary_input.behavior()
    assert (behavior.thread_id, behavior.run_id) == ("thr_1", "run_1")
    assert behavior.runtime_context == {"tenant": "t1"}


# ---------------------------------------------------------------------------


def test_ad_053_a_custom_generator_replaces_model_and_instructions() -> None:
    summary_model = ScriptedModel(steps=[])
    selected = ScriptedModel(steps=[])
    built: list[Any] = []
    seen: list[ReasoningSummaryInput] = []

    async def generator(summary_input: ReasoningSummaryInput) -> str:
        seen.append(summary_input)
        return "  Adds   two numbers "

    agent = _agent(
        ReasoningSummary(
            model=summary_model,
            instructions=lambda i: built.append(i) or "never",
            generator=generator,
        )
    )
    summary_input = _input()
    assert _generate(agent, selected, summary_input) == "Adds two numbers"
    assert summary_model.requests == [] and selected.requests == [] and built == []
    assert len(seen) == 1 and seen[0] is summary_input


@pytest.mark.parametrize("value", [None, "", "   "])
def test_ad_053_an_empty_generator_result_is_no_summary(value: Any) -> None:
    agent = _agent(ReasoningSummary(generator=lambda i: value))
    assert _generate(agent, ScriptedModel(steps=[])) is None


def test_ad_053_a_non_string_generator_result_is_an_error() -> None:
    agent = _agent(ReasoningSummary(generator=lambda i: 42))
    with pytest.raises(TypeError, match="string or None"):
        _generate(agent, ScriptedModel(steps=[]))


def test_ad_053_the_instruction_builder_is_called_for_the_part() -> None:
    built: list[ReasoningSummaryInput] = []

    async def instructions(summary_input: ReasoningSummaryInput) -> Any:
        built.append(summary_input)
        return [{"role": "system", "content": f"Label part {summary_input.reasoning_ordinal}"}]

    model = ScriptedModel(steps=[ScriptedStep(text="Summing two numbers.")])
    agent = _agent(ReasoningSummary(model=model, instructions=instructions))
    summary_input = _input()
    assert _generate(agent, ScriptedModel(steps=[]), summary_input) == "Summing two numbers"
    assert len(built) == 1 and built[0] is summary_input
    [request] = model.requests
    assert request.messages[0] == {"role": "system", "content": "Label part 1"}
    assert request.messages[-1]["content"][0]["text"] == _input().reasoning


def test_ad_053_default_instructions_without_a_builder() -> None:
    model = ScriptedModel(steps=[ScriptedStep(text="ok")])
    _generate(_agent(ReasoningSummary(model=model)), ScriptedModel(steps=[]))
    assert model.requests[0].system == DEFAULT_REASONING_SUMMARY_INSTRUCTIONS


# ---------------------------------------------------------------------------


def test_ad_054_a_model_selection_is_refused() -> None:
    selection = ModelSelection(model=ScriptedModel(steps=[]))
    with pytest.raises(AgentDefinitionError, match="bare LanguageModel"):
        ReasoningSummary(model=selection)  # type: ignore[arg-type]


def test_ad_054_a_resolver_returning_a_selection_is_refused_at_call_time() -> None:
    selection = ModelSelection(model=ScriptedModel(steps=[]))
    agent = _agent(ReasoningSummary(model=lambda behavior: selection))
    with pytest.raises(AgentDefinitionError, match="bare LanguageModel"):
        _generate(agent, ScriptedModel(steps=[]))


def test_ad_054_without_a_summary_model_the_selected_model_answers_bare() -> None:
    selected = ScriptedModel(steps=[ScriptedStep(text='"Adding numbers."')])
    agent = _agent(True, model=ModelSelection(model=selected, settings={"temperature": 0.1}))
    assert _generate(agent, selected) == "Adding numbers"
    [request] = selected.requests
    assert isinstance(request, ModelRequest)
    # Only the summary call's own output bound, never the run's settings.
    assert dict(request.settings) == {"maxOutputTokens": 48}
    assert not request.provider_options and not request.tools


def test_ad_054_the_summary_model_resolver_gets_the_run_facts() -> None:
    model = ScriptedModel(steps=[ScriptedStep(text="ok")])
    seen: list[Any] = []
    agent = _agent(ReasoningSummary(model=lambda behavior: seen.append(behavior) or model))
    assert _generate(agent, ScriptedModel(steps=[])) == "ok"
    assert seen[0].thread_id == "thr_1" and seen[0].runtime_context == {"tenant": "t1"}


def test_clean_summary_takes_one_short_line() -> None:
    assert clean_summary("\n 'Checks the weather.'\nmore") == "Checks the weather"
    assert clean_summary("") is None
    assert len(clean_summary("x" * 1000) or "") == MAX_SUMMARY_LENGTH
