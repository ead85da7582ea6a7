"""MCP tools through the whole Django path (SQLite and PostgreSQL): the registry, send,
aexecute_run, the ORM store and pending actions, against a real MCP server subprocess
(tests/support/mcp_server.py) over streamable HTTP, and over stdio for one run."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from pai_agents import ScriptedModel, ScriptedStep, define_agent
from pai_agents.lifecycle import AgentLifecycle
from pai_agents.mcp import MCPServer
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Run
from tests.support.inline_runs import send_and_execute
from tests.support.mcp_fixtures import HttpMCPServer, calls, free_port, http_server, stdio_server

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def http_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-django")


@pytest.fixture(scope="module")
def http_url(http_state: Path) -> Iterator[str]:
    with HttpMCPServer(http_state) as url:
        yield url


@pytest.fixture
def state(http_state: Path) -> Path:
    for entry in http_state.iterdir():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    return http_state


class _Sources(AgentLifecycle):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def before_tool_call(self, input: Any) -> None:
        self.seen.append(("before", input.tool.name, input.tool.source))

    def after_tool_result(self, input: Any) -> None:
        self.seen.append(("after", input.tool.name, input.tool.source))


def _serve(*steps: ScriptedStep, server: MCPServer, **options: Any) -> Any:
    """Register an agent "mcp" with these scripted steps and the MCP server."""
    agent = define_agent(
        "mcp",
        instructions="x",
        model=ScriptedModel(steps=list(steps)),
        mcp_servers=[server],
        **options,
    )
    return override_settings(PAI={**settings.PAI, "AGENTS": [agent]})


def _tool_parts(run: Run) -> list[dict[str, Any]]:
    return [
        p
        for m in Message.objects.filter(run_id=run.id).order_by("id")
        for p in m.parts
        if p["type"].startswith("tool-")
    ]


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_a_run_calls_an_mcp_tool_and_hooks_see_source_mcp(
    alice: Identity, http_url: str, state: Path, transport: str
) -> None:
    server = http_server(http_url) if transport == "http" else stdio_server(state)
    sources = _Sources()
    steps = [ScriptedStep.call("echo", {"text": "hi"}, id="e1"), ScriptedStep.reply("said hi")]
    with _serve(*steps, server=server, lifecycle=sources):
        thread = services.create_thread(alice, agent="mcp")
        run = send_and_execute(alice, thread.id, "say hi")
    assert run.status == Run.Status.COMPLETED
    [part] = _tool_parts(run)
    assert (part["state"], part["output"]) == ("output-available", {"result": "echo: hi"})
    assert sources.seen == [("before", "echo", "mcp"), ("after", "echo", "mcp")]
    assert calls(state) == [{"tool": "echo", "arguments": {"text": "hi"}}]


def test_an_approval_required_mcp_tool_waits_then_runs_once(
    alice: Identity, http_url: str, state: Path
) -> None:
    import asyncio

    from pai_threads.execution.execute import aexecute_run

    server = http_server(http_url, needs_approval={"add"})
    steps = [ScriptedStep.call("add", {"a": 20, "b": 22}, id="a1"), ScriptedStep.reply("42")]
    with _serve(*steps, server=server):
        thread = services.create_thread(alice, agent="mcp")
        run = send_and_execute(alice, thread.id, "add")
        assert run.status == Run.Status.WAITING
        action = PendingAction.objects.get(run_id=run.id)
        assert (action.kind, action.tool_name) == ("approval", "add")
        assert calls(state) == []
        services.submit_action(alice, action.id, {"approved": True}, dispatch=False)
        asyncio.run(aexecute_run(run.id))
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert calls(state) == [{"tool": "add", "arguments": {"a": 20, "b": 22}}]
    assert _tool_parts(run)[-1]["output"] == {"result": 42}


def test_a_changed_tool_list_is_picked_up_by_the_next_run(
    alice: Identity, http_url: str, state: Path
) -> None:
    server = http_server(http_url)
    steps = [
        ScriptedStep.call("multiply", {"a": 6, "b": 7}, id="m1"),  # run 1: not listed
        ScriptedStep.reply("no such tool"),
        ScriptedStep.call("multiply", {"a": 6, "b": 7}, id="m2"),  # run 2: listed
        ScriptedStep.reply("42"),
    ]
    with _serve(*steps, server=server):
        thread = services.create_thread(alice, agent="mcp")
        first = send_and_execute(alice, thread.id, "multiply")
        (state / "with-multiply").write_text("1")
        second = send_and_execute(alice, thread.id, "multiply again")
    [unknown] = [
        p for m in Message.objects.filter(run_id=first.id) for p in m.parts if "toolCallId" in p
    ]
    assert unknown["type"] == "dynamic-tool" and unknown["state"] == "output-error"
    assert "unavailable tool 'multiply'" in unknown["errorText"]
    assert _tool_parts(second)[0]["output"] == {"result": 42}
    assert calls(state) == [{"tool": "multiply", "arguments": {"a": 6, "b": 7}}]


def test_a_failing_mcp_tool_is_a_model_visible_error(
    alice: Identity, http_url: str, state: Path
) -> None:
    steps = [ScriptedStep.call("fail", {"message": "quota exceeded"}), ScriptedStep.reply("x")]
    with _serve(*steps, server=http_server(http_url)):
        thread = services.create_thread(alice, agent="mcp")
        run = send_and_execute(alice, thread.id, "fail")
    assert run.status == Run.Status.COMPLETED
    [part] = _tool_parts(run)
    assert part["state"] == "output-error"
    assert part["errorText"] == "Error executing tool fail: quota exceeded"


def test_a_server_that_is_down_fails_the_run_privately(alice: Identity, state: Path) -> None:
    """The run fails with MCPServerUnavailable kept private on the run; a client sees the
    failed status only."""
    reports: list[Any] = []
    server = MCPServer.http("down", url=f"http://127.0.0.1:{free_port()}/mcp", connect_timeout=3)
    with _serve(ScriptedStep.reply("never"), server=server, on_runtime_error=reports.append):
        thread = services.create_thread(alice, agent="mcp")
        run = send_and_execute(alice, thread.id, "hello")
    assert run.status == Run.Status.FAILED
    assert run.error is not None and run.error["type"] == "MCPServerUnavailable"
    assert [type(r.error).__name__ for r in reports] == ["MCPServerUnavailable"]
    assert not Message.objects.filter(run_id=run.id, role="assistant").exists()
