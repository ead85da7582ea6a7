"""Thread titles without Django (AD-007, AD-043..AD-049): the ``thread_titles`` option checked
at definition time, the schedule as a pure function of the title record, and the generator
call (custom or default) on scripted models."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pai_agents import (
    AgentDefinitionError,
    ModelRequest,
    ModelSelection,
    ScriptedModel,
    ScriptedStep,
    ThreadTitleInput,
    ThreadTitles,
    define_agent,
)
from pai_agents.title_generation import clean_title, generate_title, transcript_text
from pai_agents.titles import DEFAULT_TITLE_INSTRUCTIONS, TitleRecord

pytestmark = pytest.mark.filterwarnings("error")

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CONVERSATION: list[dict[str, Any]] = [
    {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Plan a trip to Lisbon"}]},
    {
        "id": "m2",
        "role": "assistant",
        "parts": [
            {"type": "tool-weather", "toolCallId": "c1", "state": "output-available"},
            {"type": "text", "text": "Sunny all week."},
        ],
    },
]


def _agent(thread_titles: Any = None, model: Any = None, **options: Any) -> Any:
    return define_agent(
        "titled",
        instructions="Help.",
        model=model or ScriptedModel(steps=[]),
        thread_titles=thread_titles,
        **options,
    )


def _input(**overrides: Any) -> ThreadTitleInput:
    values: dict[str, Any] = {
        "thread_id": "thr_1",
        "run_id": "run_1",
        "identity": {"userId": "u1"},
        "client_data": {},
        "runtime_context": {"tenant": "t1"},
        "title": "",
        "title_source": "",
        "messages": CONVERSATION,
    }
    return ThreadTitleInput(**{**values, **overrides})


def _record(**overrides: Any) -> TitleRecord:
    values: dict[str, Any] = {"title": "", "source": "", "generated_at": None}
    return TitleRecord(**{**values, **overrides})


def _generate(agent: Any, title_input: ThreadTitleInput | None = None) -> str | None:
    config = agent.thread_titles
    return asyncio.run(generate_title(agent, config, title_input or _input()))


# --------------------------------------------------------------------------- AD-007


def test_ad_007_thread_titles_are_off_unless_configured() -> None:
    assert _agent().thread_titles is None
    assert _agent(False).thread_titles is None
    assert _agent().manifest()["threadTitles"] is False


def test_ad_007_true_selects_the_default_generator() -> None:
    config = _agent(True).thread_titles
    assert config == ThreadTitles()
    assert (config.generate, config.overwrite) == ("once", "empty")
    assert (config.model, config.instructions, config.generator) == (None, None, None)
    assert _agent(True).manifest()["threadTitles"] is True


@pytest.mark.parametrize("value", ["yes", 1, {"generate": "once"}])
def test_ad_007_other_values_are_refused_at_definition_time(value: Any) -> None:
    with pytest.raises(AgentDefinitionError, match="thread_titles"):
        _agent(value)


def test_ad_007_a_titles_option_leaves_the_default_version_alone() -> None:
    assert _agent(True).version == _agent().version


# --------------------------------------------------------------------------- AD-043, AD-044


def test_ad_044_overwrite_defaults_to_empty_once_and_generated_for_refresh() -> None:
    assert ThreadTitles().overwrite == "empty"
    assert ThreadTitles(generate="refresh").overwrite == "generated"
    assert ThreadTitles(generate="refresh", overwrite="always").overwrite == "always"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"generate": "twice"}, "generate"),
        ({"overwrite": "manual"}, "overwrite"),
        ({"generate": "refresh", "after_runs": -1}, "after_runs"),
        ({"generate": "refresh", "after_messages": True}, "after_messages"),
        ({"generate": "refresh", "min_age_ms": 1.5}, "min_age_ms"),
        ({"after_runs": 2}, "refresh threshold"),
        ({"generator": "not callable"}, "generator"),
        ({"instructions": [{"role": "user", "content": "no"}]}, "system messages"),
    ],
)
def test_ad_043_044_malformed_options_are_refused(options: dict[str, Any], match: str) -> None:
    with pytest.raises(AgentDefinitionError, match=match):
        ThreadTitles(**options)


def test_ad_043_once_is_due_until_a_title_was_generated() -> None:
    once = ThreadTitles()
    assert once.due(_record(), NOW)
    assert not once.due(_record(title="Trip", source="generated", generated_at=NOW), NOW)
    # Always-overwrite still generates at most one automatic title.
    always = ThreadTitles(overwrite="always")
    assert not always.due(_record(title="Trip", source="generated", generated_at=NOW), NOW)


def test_ad_043_refresh_is_due_when_every_configured_threshold_is_met() -> None:
    refresh = ThreadTitles(generate="refresh", after_runs=2, after_messages=4, min_age_ms=60_000)
    before = NOW - timedelta(minutes=5)
    base = {"title": "Trip", "source": "generated", "generated_at": before}
    last = {"runs_at_generation": 1, "messages_at_generation": 2}
    assert refresh.due(_record(**base, **last, runs=3, messages=6), NOW)
    assert not refresh.due(_record(**base, **last, runs=2, messages=6), NOW)  # runs
    assert not refresh.due(_record(**base, **last, runs=3, messages=5), NOW)  # messages
    young = {**base, "generated_at": NOW - timedelta(seconds=30)}
    assert not refresh.due(_record(**young, **last, runs=3, messages=6), NOW)  # age
    assert refresh.due(_record(), NOW)  # the first title needs no threshold
    # Without thresholds, refresh regenerates after every completed run.
    assert ThreadTitles(generate="refresh").due(_record(**base, **last, runs=1), NOW)


def test_ad_044_045_overwrite_decides_which_titles_may_be_replaced() -> None:
    manual = _record(title="Mine", source="manual")
    generated = _record(title="Auto", source="generated")
    cleared = _record(title="", source="manual")  # a manual rename to no title
    empty = ThreadTitles(generate="refresh", overwrite="empty")
    generated_only = ThreadTitles(generate="refresh")
    always = ThreadTitles(generate="refresh", overwrite="always")
    assert [empty.may_replace(r) for r in (manual, generated, cleared, _record())] == [
        False,
        False,
        False,
        True,
    ]
    assert [generated_only.may_replace(r) for r in (manual, generated, cleared)] == [
        False,
        True,
        False,
    ]
    assert all(always.may_replace(r) for r in (manual, generated, cleared))
    assert always.due(manual, NOW) and not generated_only.due(manual, NOW)


# --------------------------------------------------------------------------- AD-046


def test_ad_046_a_model_selection_is_refused_as_the_title_model() -> None:
    selection = ModelSelection(model=ScriptedModel(steps=[]))
    with pytest.raises(AgentDefinitionError, match="bare LanguageModel"):
        ThreadTitles(model=selection)  # type: ignore[arg-type]
    with pytest.raises(AgentDefinitionError, match="resolver"):
        ThreadTitles(model="gpt-4o")  # type: ignore[arg-type]


def test_ad_046_a_resolver_returning_a_model_selection_fails_the_title_call() -> None:
    selection = ModelSelection(model=ScriptedModel(steps=[]))
    agent = _agent(ThreadTitles(model=lambda behavior: selection))
    with pytest.raises(AgentDefinitionError, match="bare LanguageModel"):
        _generate(agent)


def test_ad_046_default_generator_uses_the_selected_model_without_run_settings() -> None:
    model = ScriptedModel(steps=[ScriptedStep.reply('"Lisbon trip."')])
    selection = ModelSelection(
        model=model,
        settings={"temperature": 0.1, "maxOutputTokens": 900},
        provider_options={"openai": {"store": True}},
    )
    agent = _agent(True, model=lambda behavior: selection)

    assert _generate(agent) == "Lisbon trip"
    (request,) = model.requests
    # Only the title call's own output bound, never the run's settings (900 tokens here).
    assert request.settings == {"maxOutputTokens": 32} and dict(request.provider_options) == {}
    assert request.tools == [] and dict(request.provider_tools) == {}


def test_ad_046_the_title_model_wins_and_its_resolver_gets_the_run_facts() -> None:
    seen: list[Any] = []
    title_model = ScriptedModel(steps=[ScriptedStep.reply("From the title model")])
    main = ScriptedModel(steps=[])

    def resolve(behavior: Any) -> Any:
        seen.append(behavior)
        return title_model

    agent = _agent(ThreadTitles(model=resolve), model=main)
    assert _generate(agent) == "From the title model"
    assert main.requests == [] and len(title_model.requests) == 1
    (behavior,) = seen
    assert (behavior.thread_id, behavior.run_id) == ("thr_1", "run_1")
    assert behavior.identity == {"userId": "u1"}
    assert behavior.runtime_context == {"tenant": "t1"}


# --------------------------------------------------------------------------- AD-047


def test_ad_047_default_prompt_and_the_conversation_as_text() -> None:
    model = ScriptedModel(steps=[ScriptedStep.reply("Trip")])
    _generate(_agent(True, model=model))
    (request,) = model.requests
    assert request.system == DEFAULT_TITLE_INSTRUCTIONS
    (message,) = request.messages
    assert message["role"] == "user"
    assert message["content"][0]["text"] == (
        "User: Plan a trip to Lisbon\nAssistant: [used the weather tool] Sunny all week."
    )


def test_ad_047_the_instruction_builder_is_called_for_each_default_call() -> None:
    calls: list[ThreadTitleInput] = []

    def instructions(title_input: ThreadTitleInput) -> list[dict[str, Any]]:
        calls.append(title_input)
        return [{"role": "system", "content": f"Title call {len(calls)}"}]

    model = ScriptedModel(steps=[ScriptedStep.reply("One"), ScriptedStep.reply("Two")])
    agent = _agent(ThreadTitles(instructions=instructions), model=model)
    assert _generate(agent) == "One"
    assert _generate(agent, _input(title="One", title_source="generated")) == "Two"

    assert len(calls) == 2 and calls[1].title == "One"
    assert [r.messages[0] for r in model.requests] == [
        {"role": "system", "content": "Title call 1"},
        {"role": "system", "content": "Title call 2"},
    ]
    assert all(r.system is None for r in model.requests)


# --------------------------------------------------------------------------- AD-048, AD-049


def test_ad_048_a_custom_generator_replaces_the_model_and_instructions() -> None:
    model = ScriptedModel(steps=[])
    instruction_calls: list[Any] = []
    generated: list[ThreadTitleInput] = []

    async def generator(title_input: ThreadTitleInput) -> str:
        generated.append(title_input)
        return "  Custom \n title "

    config = ThreadTitles(
        model=model, instructions=lambda i: instruction_calls.append(i), generator=generator
    )
    agent = _agent(config, model=model)
    assert _generate(agent) == "Custom title"
    assert model.requests == [] and instruction_calls == []
    assert generated[0].messages == CONVERSATION


@pytest.mark.parametrize("result", [None, "", "   \n "])
def test_ad_049_none_or_empty_results_mean_no_title(result: str | None) -> None:
    assert _generate(_agent(ThreadTitles(generator=lambda i: result))) is None
    model = ScriptedModel(steps=[ScriptedStep(text=result)])
    assert _generate(_agent(True, model=model)) is None


def test_ad_049_a_generator_must_return_a_string_or_none() -> None:
    with pytest.raises(TypeError, match="string or None"):
        _generate(_agent(ThreadTitles(generator=lambda i: 42)))


def test_default_answers_are_cleaned_into_titles() -> None:
    assert clean_title('Title: "Lisbon   in June."\nThe rest') == "Lisbon in June"
    assert clean_title("**Budget review**") == "Budget review"
    assert clean_title("x" * 300) == "x" * 200
    assert clean_title("") is None and clean_title('""') is None


def test_long_conversations_keep_their_newest_lines() -> None:
    messages = [
        {"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": f"{i} " + "w" * 900}]}
        for i in range(20)
    ]
    text = transcript_text(messages)
    assert len(text) <= 8_000 and text.splitlines()[-1].startswith("User: 19 ")
    assert "User: 0 " not in text


def test_model_request_is_the_only_thing_the_default_call_sends() -> None:
    seen: list[ModelRequest] = []

    def respond(request: ModelRequest) -> ScriptedStep:
        seen.append(request)
        return ScriptedStep(reasoning="thinking", text="Reasoned title")

    assert _generate(_agent(True, model=ScriptedModel(respond=respond))) == "Reasoned title"
    assert len(seen) == 1
