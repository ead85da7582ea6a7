"""``manage.py pai_check`` (issue 12, point 4): every agent's model, schemas, tools and the
price table, and with ``--ping`` one tiny call to a real HTTP model server."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from pai_agents import define_agent
from pai_agents.behavior import AgentBehaviorInput
from pai_agents.models.openai_chat import OpenAIChatModel
from tests.support.fake_openai import ErrorResponse, FakeOpenAIServer, text_response

pytestmark = pytest.mark.django_db

# The server URL reaches the agent through the environment: the registry imports this
# module by its dotted path, which may be a second copy of the module pytest imported.
URL_VAR = "PAI_TEST_PAI_CHECK_URL"


def _served(behavior: AgentBehaviorInput) -> OpenAIChatModel:
    return OpenAIChatModel(model="fake-model", api_key="test", base_url=os.environ[URL_VAR])


def _unconfigured(behavior: AgentBehaviorInput) -> OpenAIChatModel:
    raise RuntimeError("OPENAI_API_KEY is not set")


served = define_agent("served", instructions="Answer.", model=_served)
unconfigured = define_agent("unconfigured", instructions="Answer.", model=_unconfigured)
HERE = "tests.integration.test_pai_check"


@pytest.fixture
def server(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    settings.PAI = {**settings.PAI, "AGENTS": [f"{HERE}.served"]}
    with FakeOpenAIServer(responses=[text_response("OK")]) as fake:
        monkeypatch.setenv(URL_VAR, fake.base_url)
        yield fake


def _check(*args: str) -> tuple[dict[str, Any], int]:
    out = StringIO()
    try:
        call_command("pai_check", "--json", *args, stdout=out)
        code = 0
    except CommandError as exc:
        code = exc.returncode
    return json.loads(out.getvalue()), code


def test_the_demo_agent_passes_and_the_text_report_names_its_tools() -> None:
    out = StringIO()
    call_command("pai_check", stdout=out)
    assert "ok   assistant" in out.getvalue() and "calculator" in out.getvalue()


def test_ping_makes_one_tiny_call_to_the_model_server(server: FakeOpenAIServer) -> None:
    report, code = _check("--ping")
    assert code == 0 and report["ok"] is True
    (agent,) = report["agents"]
    assert agent["model"] == "openai:fake-model" and agent["ping"]["ok"] is True
    (request,) = server.requests
    assert request.get("max_completion_tokens", request.get("max_tokens")) == 1
    # Without --ping no call is made.
    report, code = _check()
    assert code == 0 and report["agents"][0]["ping"] is None and len(server.requests) == 1


def test_a_failing_ping_fails_the_check(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.PAI = {**settings.PAI, "AGENTS": [f"{HERE}.served"]}
    with FakeOpenAIServer(responses=[ErrorResponse(401)]) as fake:
        monkeypatch.setenv(URL_VAR, fake.base_url)
        report, code = _check("--ping")
    assert code == 1 and report["ok"] is False
    assert report["agents"][0]["ping"]["ok"] is False and report["agents"][0]["ping"]["error"]


def test_an_agent_whose_model_does_not_resolve_and_a_bad_price_fail(settings: Any) -> None:
    settings.PAI = {
        **settings.PAI,
        "AGENTS": [*settings.PAI["AGENTS"], f"{HERE}.unconfigured"],
        "MODEL_PRICES": {"gpt-x": {"input": "cheap", "output": 1}},
    }
    report, code = _check()
    assert code == 1
    by_name = {agent["agent"]: agent for agent in report["agents"]}
    assert by_name["assistant"]["ok"] is True
    assert "OPENAI_API_KEY is not set" in by_name["unconfigured"]["problems"][0]
    assert report["prices"] == ["MODEL_PRICES['gpt-x']['input'] is not a number"]


def test_system_check_errors_are_reported_first(settings: Any) -> None:
    settings.PAI = {**settings.PAI, "AGENTS": ["no.such.agent"]}
    report, code = _check()
    assert code == 1 and report["agents"] == []
    assert report["systemChecks"]["errors"][0].startswith("pai.E001")
