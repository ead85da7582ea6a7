"""System checks of the agents' MCP servers (docs/mcp.md, "Checks"): ``manage.py check``
warns about a stdio command that is not there (``pai.W012``) and an HTTP URL without a host
(``pai.W013``), naming the agent and the server, without starting or reaching anything."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.checks import Warning
from django.core.management import call_command

from pai_threads.checks import check_agents
from pai_threads.checks.mcp import MCP_HINTS, check_mcp_servers
from pai_threads.execution import registry
from tests.support.mcp_check_agents import BROKEN, FINE, MISSING

AGENTS = "tests.support.mcp_check_agents"


@pytest.fixture
def serve(settings: Any) -> Iterator[Callable[..., None]]:
    """Serve the given agents of tests.support.mcp_check_agents (the registry re-reads)."""
    base = settings.PAI

    def configure(*names: str) -> None:
        settings.PAI = {**base, "AGENTS": [f"{AGENTS}.{name}" for name in names]}
        registry.clear_cache()

    yield configure
    registry.clear_cache()


def _by_server(messages: list[Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for message in messages:
        server = message.msg.split("MCP server '", 1)[1].split("'", 1)[0]
        assert server not in found, message.msg
        found[server] = message
    return found


def test_warnings_name_exactly_the_broken_servers(serve: Callable[..., None]) -> None:
    serve("mcp_checked")
    found = _by_server(check_mcp_servers())
    assert set(found) == set(BROKEN)
    assert not set(found) & set(FINE)
    for server, (check_id, text) in BROKEN.items():
        message = found[server]
        assert isinstance(message, Warning)
        assert message.id == check_id and message.hint == MCP_HINTS[check_id]
        assert message.msg.startswith(f"agent 'mcp_checked', MCP server '{server}': ")
        assert text in message.msg


def test_a_required_server_fails_runs_an_optional_one_is_skipped(
    serve: Callable[..., None],
) -> None:
    serve("mcp_checked")
    found = _by_server(check_mcp_servers())
    assert found["missing"].msg.endswith("runs of the agent will fail when they start")
    assert found["missing_optional"].msg.endswith("it is optional: runs go on without its tools")
    assert "optional=True" in MCP_HINTS["pai.W012"]


def test_a_sub_agent_served_only_through_its_parent_is_checked(
    serve: Callable[..., None],
) -> None:
    serve("mcp_parent")
    [message] = check_mcp_servers()
    assert message.id == "pai.W012"
    expected = f"agent 'mcp_child', MCP server 'child_tools': command {MISSING!r}"
    assert message.msg.startswith(expected)


def test_manage_py_check_prints_the_warnings(serve: Callable[..., None]) -> None:
    serve("mcp_checked", "mcp_parent")
    out, err = StringIO(), StringIO()
    call_command("check", "--tag", "pai", stdout=out, stderr=err)  # warnings do not fail
    report = err.getvalue()
    for server, (check_id, _) in BROKEN.items():
        assert f"{check_id}) agent 'mcp_checked', MCP server '{server}'" in report
    assert "agent 'mcp_child', MCP server 'child_tools'" in report
    for server in FINE:
        assert f"MCP server '{server}'" not in report
    assert report.count("pai.W012") == 6 and report.count("pai.W013") == 2


def test_agents_without_mcp_servers_are_silent(settings: Any) -> None:
    registry.clear_cache()
    assert check_mcp_servers() == []


def test_no_check_when_the_agents_do_not_load(serve: Callable[..., None]) -> None:
    serve("no_such_agent")
    assert check_mcp_servers() == []  # check_agents reports pai.E001


def test_a_missing_sdk_is_reported_as_the_agent_module_failing_to_import(
    serve: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No MCP check covers a missing ``mcp`` SDK: define_agent raises when the module
    imports, so the agent never loads and ``pai.E001`` carries the install hint."""
    import pai_agents.definition_checks

    monkeypatch.setattr(pai_agents.definition_checks, "sdk_missing", lambda: "install mcp")
    monkeypatch.delitem(sys.modules, AGENTS)
    serve("mcp_checked")
    [error] = [m for m in check_agents() if m.id == "pai.E001"]
    assert "AgentDefinitionError" in error.msg and "install mcp" in error.msg
    assert check_mcp_servers() == []
