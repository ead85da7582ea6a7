"""Capability bindings on Django (docs/capabilities.md): ``PAI["CAPABILITIES"]`` binds each
id a registered agent needs; ``manage.py check`` reports a gap (AD-063) before any run meets
it, and a run that meets one anyway fails at once instead of stranding."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from pydantic import BaseModel

from pai_agents import (
    ScriptedModel,
    ScriptedStep,
    ScriptedToolCall,
    ToolContext,
    capability,
    define_agent,
    tool,
)
from pai_threads import services
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, Run
from tests.support.inline_runs import send_and_execute

pytestmark = pytest.mark.django_db(transaction=True)

HERE = "tests.integration.test_capability_bindings"


class Clock:
    def now(self) -> str:
        return "12:00"


class Broken:
    pass


CLOCK = capability("clock", Clock)
office_clock = Clock()
not_a_clock = Broken()


class Args(BaseModel):
    pass


@tool(input=Args, capabilities={"wall": CLOCK})
def what_time(args: Args, ctx: ToolContext) -> str:
    """The time on the bound clock."""
    return str(ctx.capabilities["wall"].now())


def _model(behavior: Any) -> ScriptedModel:
    return ScriptedModel(
        steps=[
            ScriptedStep(tool_calls=[ScriptedToolCall(name="what_time", input={})]),
            ScriptedStep.reply("done"),
        ]
    )


timekeeper = define_agent("timekeeper", instructions="x", model=_model, tools=[what_time])


@pytest.fixture
def pai(settings: Any) -> Any:
    base = settings.PAI

    def configure(capabilities: Any) -> None:
        settings.PAI = {
            **base,
            "AGENTS": [*base["AGENTS"], f"{HERE}.timekeeper"],
            "CAPABILITIES": capabilities,
        }
        registry.clear_cache()

    yield configure
    registry.clear_cache()


def _check_ids() -> str:
    try:
        call_command("check", "--tag", "pai")
    except SystemCheckError as exc:
        return str(exc)
    return ""


def test_ad_063_manage_py_check_reports_an_unbound_capability(pai: Any) -> None:
    """AD-063: a registered agent's capability without a binding is a system check error."""
    pai({})
    report = _check_ids()
    assert "pai.E020" in report and "'clock'" in report and "timekeeper" in report


def test_a_binding_of_the_wrong_kind_or_path_is_reported(pai: Any) -> None:
    pai({"clock": f"{HERE}.not_a_clock"})
    assert "pai.E022" in _check_ids()
    pai({"clock": f"{HERE}.no_such_clock"})
    assert "pai.E021" in _check_ids()
    pai({"clock": f"{HERE}.office_clock"})
    assert _check_ids() == ""


def _send() -> Run:
    identity = Identity(scope_key="user:cap")
    thread = services.create_thread(identity, agent="timekeeper")
    return send_and_execute(identity, thread.id, "time?")


def test_a_run_on_django_gets_the_bound_implementation(pai: Any) -> None:
    pai({"clock": f"{HERE}.office_clock"})
    run = _send()
    assert run.status == Run.Status.COMPLETED
    parts = [
        p for m in Message.objects.filter(run_id=run.id) for p in m.parts if p.get("toolCallId")
    ]
    assert [p["output"] for p in parts] == ["12:00"]


def test_a_run_that_meets_a_missing_binding_fails_at_once(pai: Any) -> None:
    """With the check silenced (or the setting changed at runtime), the run ends failed with
    a private error for operators; it does not wait for its lease to expire."""
    pai({})
    run = _send()
    assert run.status == Run.Status.FAILED
    assert run.error is not None and run.error["type"] == "CapabilityBindingError"
    assert run.lease_owner == ""
