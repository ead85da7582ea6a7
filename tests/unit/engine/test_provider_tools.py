"""Provider tools end to end: ``define_agent(provider_tools=)`` -> ``ModelRequest.provider_tools``
-> provider-executed calls validated against them (AD-071, AD-072, LC-089, LC-127), on the
hook-free loop and on the lifecycle loop."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import (
    AgentDefinitionError,
    ProviderTool,
    ScriptedModel,
    ScriptedStep,
    ScriptedToolCall,
    define_agent,
)
from pai_agents.lifecycle import Continue, ModelCallPatch, ModelStepPatch, RunPatch
from pai_agents.messages.chunks import validate_chunk
from tests.support.engine_harness import Harness, executed, harness

WEB = {"type": "web_search"}
CODE = {"type": "code_interpreter", "container": {"type": "auto"}}


class SearchArgs(BaseModel):
    query: str


def provider_call(name: str, input: Any, **options: Any) -> ScriptedToolCall:
    return ScriptedToolCall(name=name, input=input, provider_executed=True, **options)


def tool_parts(h: Harness) -> list[dict[str, Any]]:
    return [p for m in h.assistant() for p in m["parts"] if p.get("toolCallId")]


# A lifecycle part that changes nothing: it moves the run onto the hooked loop.
HOOKED: list[Any] = [{"after_step": lambda i: None}]
LOOPS = pytest.mark.parametrize("parts", [[], HOOKED], ids=["plain", "lifecycle"])


# -- definition ----------------------------------------------------------------------------------


def test_ad_071_define_agent_declares_provider_tools_by_name() -> None:
    """AD-071: ``provider_tools`` takes a ProviderTool or its bare JSON definition; both are
    copied (mutating the caller's mapping changes nothing), listed in the manifest by name
    only, and part of the default version fingerprint."""
    source = {"type": "web_search", "filters": {"domains": ["a.example"]}}
    typed = ProviderTool(definition=CODE, input_schema=SearchArgs)
    model = ScriptedModel()
    agent = define_agent(
        "pt", instructions="x", model=model, provider_tools={"web_search": source, "code": typed}
    )
    source["filters"]["domains"].append("b.example")
    assert agent.provider_tools["web_search"] == ProviderTool(
        definition={"type": "web_search", "filters": {"domains": ["a.example"]}}
    )
    assert agent.provider_tools["code"] is typed
    assert agent.manifest()["providerTools"] == ["web_search", "code"]
    assert "filters" not in str(agent.manifest())
    plain = define_agent("pt", instructions="x", model=model)
    assert plain.manifest()["providerTools"] == []
    assert plain.version != agent.version


@pytest.mark.parametrize(
    ("provider_tools", "message"),
    [
        ({"lookup": WEB}, "clashes with a registered tool"),
        ({"web": {"type": "web_search", "max": math.nan}}, "not a finite number"),
        ({"web": {"type": "web_search", "sites": ("a", "b")}}, "not a JSON type"),
        ({"web": {"type": object()}}, "not a JSON type"),
        ({"web": {1: "x"}}, "is not a string"),
        ({"web": {}}, "non-empty JSON object"),
        ({"web": "web_search"}, "non-empty JSON object"),
        ({"": WEB}, "must match"),
        ({"bad name": WEB}, "must match"),
        ([("web", WEB)], "must map names"),
    ],
)
def test_ad_071_provider_tools_are_checked_at_definition_time(
    provider_tools: Any, message: str
) -> None:
    """AD-071: a provider tool's name must not clash with a registered tool and its
    definition must be a strict-JSON object; anything else fails at definition time."""
    from tests.support.engine_harness import lookup

    with pytest.raises(AgentDefinitionError, match=message):
        define_agent(
            "pt",
            instructions="x",
            model=ScriptedModel(),
            tools=[lookup],
            provider_tools=provider_tools,
        )


def test_ad_071_a_provider_tool_input_schema_must_be_a_pydantic_model() -> None:
    """AD-071: ``ProviderTool(input_schema=)`` takes a pydantic model class only."""
    with pytest.raises(TypeError, match="pydantic model class"):
        ProviderTool(definition=WEB, input_schema=dict)  # type: ignore[arg-type]


# -- the provider request -------------------------------------------------------------------------


@LOOPS
async def test_ad_071_declared_provider_tools_reach_every_model_request(parts: list[Any]) -> None:
    """AD-071: on both loops every ModelRequest carries the declared provider tools as
    provider-native definitions beside the registered PAI tools, and the step record names
    them."""
    h = harness(
        [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("ok")],
        parts=parts,
        provider_tools={"web_search": WEB, "code": ProviderTool(definition=CODE)},
    )
    assert (await h.run()).status == "completed"
    assert len(h.model.requests) == 2
    for request in h.model.requests:
        assert request.provider_tools == {"web_search": WEB, "code": CODE}
        assert "web_search" not in [t["name"] for t in request.tools]
    assert h.model.requests[0].provider_tools["web_search"] is not WEB  # a fresh copy
    steps = h.store.steps[h.run_id]
    assert [s.request["providerTools"] for s in steps] == [["web_search", "code"]] * 2


# -- provider-executed calls ----------------------------------------------------------------------


@LOOPS
async def test_ad_071_lc_127_a_call_to_a_declared_provider_tool_is_valid_never_run(
    parts: list[Any],
) -> None:
    """AD-071, LC-127: a provider-executed call of a declared provider tool is a valid,
    static tool part stored with the provider's result; PAI never executes it, makes no
    pending action and does not wait: a step with only provider calls ends the run."""
    search = provider_call("web_search", {"query": "pai"}, id="p1", result={"hits": 2})
    h = harness(
        [ScriptedStep(text="Found it.", tool_calls=[search])],
        parts=parts,
        provider_tools={"web_search": WEB},
    )
    assert (await h.run()).status == "completed"
    assert tool_parts(h) == [
        {
            "type": "tool-web_search",
            "toolCallId": "p1",
            "state": "output-available",
            "input": {"query": "pai"},
            "output": {"hits": 2},
            "providerExecuted": True,
        }
    ]
    assert (executed, h.store.actions, len(h.model.requests)) == ([], {}, 1)
    for chunk in h.sink.chunks():
        validate_chunk(chunk)


@LOOPS
async def test_lc_127_a_call_to_an_undeclared_provider_tool_is_an_error(parts: list[Any]) -> None:
    """LC-127: with provider tools declared, a provider-executed call naming another tool
    (undeclared, or one of the agent's own PAI tools) is an error; its result is ignored and
    nothing executes."""
    h = harness(
        [
            ScriptedStep(
                tool_calls=[
                    provider_call("code_run", {"src": "1+1"}, result="2"),
                    provider_call("lookup", {"q": "x"}, result="found x"),
                    provider_call("web_search", {"query": "ok"}, result=[1]),
                ]
            )
        ],
        parts=parts,
        provider_tools={"web_search": WEB},
    )
    assert (await h.run()).status == "completed"
    bad_code, bad_lookup, good = tool_parts(h)
    assert (bad_code["state"], "output" in bad_code) == ("output-error", False)
    assert "unavailable provider tool 'code_run'" in bad_code["errorText"]
    assert "unavailable provider tool 'lookup'" in bad_lookup["errorText"]
    assert (good["state"], good["output"]) == ("output-available", [1])
    assert executed == []


@LOOPS
async def test_lc_127_a_provider_tool_input_schema_validates_the_reported_call(
    parts: list[Any],
) -> None:
    """LC-127: a ProviderTool's ``input_schema`` validates the input the provider reports;
    an invalid call is an error although the provider already ran it."""
    h = harness(
        [
            ScriptedStep(
                tool_calls=[
                    provider_call("web_search", {"query": "pai"}, id="ok", result="r1"),
                    provider_call("web_search", {"q": 1}, id="bad", result="r2"),
                ]
            )
        ],
        parts=parts,
        provider_tools={"web_search": ProviderTool(definition=WEB, input_schema=SearchArgs)},
    )
    assert (await h.run()).status == "completed"
    ok, bad = tool_parts(h)
    assert (ok["state"], ok["output"]) == ("output-available", "r1")
    assert bad["state"] == "output-error"
    assert bad["errorText"].startswith("Invalid input for provider tool 'web_search'")


async def test_ad_071_lc_127_provider_results_replay_in_the_next_request() -> None:
    """AD-071, LC-127: beside a PAI tool call, the declared provider tool's call and result
    are in the next request's assistant content (not a tool message) and are sent to the
    provider again only as content, never executed."""
    local = ScriptedToolCall(name="lookup", input={"q": "a"}, id="local1")
    search = provider_call("web_search", {"query": "b"}, id="p1", result={"hits": 5})
    h = harness(
        [ScriptedStep(tool_calls=[local, search]), ScriptedStep.reply("done")],
        provider_tools={"web_search": WEB},
    )
    assert (await h.run()).status == "completed"
    assert executed == [("lookup", "a")]
    [assistant] = [m for m in h.model.requests[1].messages if m["role"] == "assistant"]
    assert [(c["type"], c["toolCallId"]) for c in assistant["content"]] == [
        ("tool-call", "local1"),
        ("tool-call", "p1"),
        ("tool-result", "p1"),
    ]
    [tool] = [m for m in h.model.requests[1].messages if m["role"] == "tool"]
    assert [c["toolCallId"] for c in tool["content"]] == ["local1"]


# -- patches --------------------------------------------------------------------------------------


def _step_patch(patch: Any) -> dict[str, Any]:
    return {"prepare_model_step": lambda i: Continue(patch=patch)}


def _call_patch(patch: Any) -> dict[str, Any]:
    async def around(request: Any, next: Any) -> Any:
        return await next(patch)

    return {"around_model_call": around}


def _run_patch(patch: Any) -> dict[str, Any]:
    return {"prepare_run": lambda i: Continue(patch=patch)}


@pytest.mark.parametrize(
    ("where", "patch_type"),
    [(_run_patch, RunPatch), (_step_patch, ModelStepPatch), (_call_patch, ModelCallPatch)],
    ids=["prepare_run", "prepare_model_step", "around_model_call"],
)
async def test_lc_089_a_patch_with_model_clears_inherited_provider_tools(
    where: Any, patch_type: Any
) -> None:
    """LC-089, LC-127: a patch supplying ``model`` starts a fresh route without the inherited
    provider tools: the new model's request carries none, and a provider-executed call to a
    declared tool in that attempt is an error. A later patch may select them again."""
    search = provider_call("web_search", {"query": "x"}, result="r")
    routed = ScriptedModel(steps=[ScriptedStep(tool_calls=[search])])
    h = harness([], parts=[where(patch_type(model=routed))], provider_tools={"web_search": WEB})
    assert (await h.run()).status == "completed"
    assert h.model.requests == []
    assert routed.requests[0].provider_tools == {}
    [part] = tool_parts(h)
    assert part["state"] == "output-error"
    assert "unavailable provider tool 'web_search'" in part["errorText"]

    routed = ScriptedModel(steps=[ScriptedStep(tool_calls=[search])])
    again = patch_type(model=routed, provider_tools={"web_search": WEB})
    h = harness([], parts=[where(again)], provider_tools={"web_search": WEB})
    assert (await h.run()).status == "completed"
    assert routed.requests[0].provider_tools == {"web_search": WEB}
    assert tool_parts(h)[0]["state"] == "output-available"


async def test_ad_072_lc_127_a_step_patch_selects_a_declared_subset() -> None:
    """AD-072, LC-086, LC-127: a step patch selects declared provider tools by their
    definition (a ProviderTool declared is reusable as its bare definition and keeps its
    input schema); the attempt advertises only those and a call to a dropped one is an
    error."""
    declared = {
        "web_search": ProviderTool(definition=WEB, input_schema=SearchArgs),
        "code": CODE,
    }
    h = harness(
        [
            ScriptedStep(
                tool_calls=[
                    provider_call("web_search", {"q": 1}, result="r"),
                    provider_call("code", {}, result="ran"),
                ]
            )
        ],
        parts=[_step_patch(ModelStepPatch(provider_tools={"web_search": dict(WEB)}))],
        provider_tools=declared,
    )
    assert (await h.run()).status == "completed"
    assert h.model.requests[0].provider_tools == {"web_search": WEB}
    search, code = tool_parts(h)
    assert search["errorText"].startswith("Invalid input for provider tool 'web_search'")
    assert "unavailable provider tool 'code'" in code["errorText"]


@pytest.mark.parametrize(
    "selection",
    [{"other": WEB}, {"web_search": {"type": "web_search", "extra": True}}],
    ids=["undeclared", "different-definition"],
)
async def test_ad_072_a_patch_cannot_add_or_redefine_a_provider_tool(selection: Any) -> None:
    """AD-072: a patch naming an undeclared provider tool, or a declared name with another
    definition, is rejected: the run fails before the provider is called."""
    h = harness(
        [ScriptedStep.reply("never")],
        parts=[_step_patch(ModelStepPatch(provider_tools=selection))],
        provider_tools={"web_search": WEB},
    )
    assert (await h.run()).status == "failed"
    assert h.model.requests == []
