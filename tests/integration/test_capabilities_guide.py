"""The examples of docs/capabilities.md, executed from the page on Django.

The declaring block becomes ``myapp.agents`` (a scripted model put in for ``model=...``),
``myapp.desk`` is a fake desk, and the settings block is used as written: the run's tool
gets the bound desk, and the page's claims hold: the aggregate keyed by id, a missing
binding reported by ``manage.py check`` as ``pai.E020`` (a path that does not import as
``pai.E021``, a binding that is not a desk as ``pai.E022``), and a run that meets the gap
anyway failing at once with a ``CapabilityBindingError``.
"""

from __future__ import annotations

import json
import re
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from pai_agents import ModelRequest, ScriptedModel, ScriptedStep
from pai_agents.models.scripted import last_user_text
from pai_threads import services
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, Run
from tests.support.inline_runs import send_and_execute

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "capabilities.md"
MODULES = ("myapp", "myapp.agents", "myapp.desk")


class FakeDesk:
    """What ``myapp.desk.zendesk_desk`` is here: records the tickets it opens."""

    def __init__(self) -> None:
        self.opened: list[tuple[str, str]] = []

    def open_ticket(self, title: str, body: str) -> str:
        self.opened.append((title, body))
        return f"T-{len(self.opened)}"


class NotADesk:
    pass


def _reporter(request: ModelRequest) -> ScriptedStep:
    """Opens a ticket for the user's problem, then says which one."""
    last = request.messages[-1]
    if last["role"] == "tool":
        [output] = [p["output"] for p in last["content"] if p.get("type") == "tool-result"]
        return ScriptedStep(text=f"Opened {output['value']}.")
    problem = last_user_text(request)
    return ScriptedStep.call("open_ticket", {"title": "Problem", "body": problem}, id="t1")


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text("utf-8"), re.S)


def _exec(code: str, namespace: dict[str, Any]) -> dict[str, Any]:
    exec(compile(code, str(PAGE), "exec", dont_inherit=True), namespace)
    return namespace


@pytest.fixture
def myapp() -> Iterator[dict[str, types.ModuleType]]:
    """``myapp.agents`` runs the page's declaring block; ``myapp.desk`` holds the fakes."""
    declaring, _settings = _blocks()[:2]
    assert declaring.count("model=...") == 1
    modules = {name: types.ModuleType(name) for name in MODULES}
    agents, desk = modules["myapp.agents"], modules["myapp.desk"]
    agents.MODEL = ScriptedModel(respond=_reporter, record_requests=False)  # type: ignore[attr-defined]
    _exec(declaring.replace("model=...", "model=MODEL"), agents.__dict__)
    desk.zendesk_desk = FakeDesk()  # type: ignore[attr-defined]
    desk.not_a_desk = NotADesk()  # type: ignore[attr-defined]
    sys.modules.update(modules)
    yield modules
    for name in MODULES:
        sys.modules.pop(name, None)
    registry.clear_cache()


@pytest.fixture
def pai(settings: Any, myapp: dict[str, types.ModuleType]) -> Callable[..., None]:
    """Apply the page's settings block on top of the test settings; ``tickets`` may be
    rebound (``None`` leaves it unbound)."""
    page = _exec(_blocks()[1], {})["PAI"]
    base = settings.PAI

    def configure(**rebind: str | None) -> None:
        bindings = {**base.get("CAPABILITIES", {}), **page["CAPABILITIES"], **rebind}
        settings.PAI = {
            **base,
            "AGENTS": [*base["AGENTS"], *page["AGENTS"]],
            "CAPABILITIES": {k: v for k, v in bindings.items() if v is not None},
        }
        registry.clear_cache()

    return configure


def _check() -> str:
    try:
        call_command("check", "--tag", "pai")
    except SystemCheckError as exc:
        return str(exc)
    return ""


def _run() -> Run:
    identity = Identity(scope_key="user:carol")
    thread = services.create_thread(identity, agent="helpdesk")
    return send_and_execute(identity, thread.id, "The printer is on fire.")


def test_the_bound_desk_serves_the_tool(
    pai: Callable[..., None], myapp: dict[str, types.ModuleType]
) -> None:
    pai()
    agents = myapp["myapp.agents"]
    helpdesk = registry.get_agent("helpdesk")
    assert helpdesk is agents.helpdesk  # type: ignore[attr-defined]
    # Keyed by id, the tool's alias "desk" remapped.
    assert helpdesk.capabilities == {"tickets": agents.TICKETS}  # type: ignore[attr-defined]
    assert _check() == ""

    run = _run()
    assert run.status == Run.Status.COMPLETED
    desk = myapp["myapp.desk"].zendesk_desk  # type: ignore[attr-defined]
    assert desk.opened == [("Problem", "The printer is on fire.")]
    parts = [p for m in Message.objects.filter(run_id=run.id) for p in m.parts]
    [call] = [p for p in parts if p.get("type") == "tool-open_ticket"]
    assert (call["state"], call["output"]) == ("output-available", "T-1")
    assert parts[-1]["text"] == "Opened T-1."


def test_manage_py_check_reports_a_missing_or_wrong_binding(pai: Callable[..., None]) -> None:
    pai(tickets=None)
    report = _check()
    assert "pai.E020" in report and "'tickets'" in report and "helpdesk" in report
    pai(tickets="myapp.desk.no_such_desk")
    assert "pai.E021" in _check()
    pai(tickets="myapp.desk.not_a_desk")
    assert "pai.E022" in _check()


def test_a_run_that_meets_the_gap_fails_at_once(pai: Callable[..., None]) -> None:
    pai(tickets=None)
    run = _run()
    assert run.status == Run.Status.FAILED and run.lease_owner == ""
    assert run.error is not None and run.error["type"] == "CapabilityBindingError"
    # Private, for operators: the thread's messages say nothing of it.
    public = json.dumps([m.parts for m in Message.objects.filter(run_id=run.id)])
    assert "tickets" not in public and "CapabilityBindingError" not in public
