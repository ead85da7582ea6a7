"""MCP tools in runs: a real MCP server (stdio and streamable HTTP), the in-memory store.

Each test runs against both transports: the stdio server is started by PAI per episode,
the HTTP one runs for the module (tests/unit/mcp_tools/conftest.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pai_agents import AbortSignal, ScriptedStep
from pai_agents.lifecycle import AgentLifecycle
from pai_agents.mcp import MCPServer, MCPServerUnavailable, MCPToolConflict
from tests.support.engine_harness import Harness, harness, lookup
from tests.support.mcp_fixtures import calls, free_port, http_server, release, stdio_server


@pytest.fixture(params=["stdio", "http"])
def server_of(request: pytest.FixtureRequest, state: Path) -> Any:
    """``server_of(**options)``: the test server over this test's transport."""

    def build(**options: Any) -> MCPServer:
        if request.param == "stdio":
            return stdio_server(state, **options)
        return http_server(request.getfixturevalue("http_url"), **options)

    return build


def _parts(h: Harness, kind: str) -> list[dict[str, Any]]:
    return [p for m in h.assistant() for p in m["parts"] if p["type"] == kind]


async def test_a_run_calls_an_mcp_tool_end_to_end(server_of: Any, state: Path) -> None:
    h = harness(
        [ScriptedStep.call("add", {"a": 2, "b": 3}, id="c1"), ScriptedStep.reply("5")],
        tools=[lookup],
        mcp_servers=[server_of()],
    )
    assert (await h.run()).status == "completed"
    [part] = _parts(h, "tool-add")
    assert part["state"] == "output-available" and part["output"] == {"result": 5}
    assert calls(state) == [{"tool": "add", "arguments": {"a": 2, "b": 3}}]
    first, second = h.model.requests
    advertised = {spec["name"]: spec for spec in first.tools}
    assert set(advertised) == {"lookup", "echo", "add", "fail", "slow", "whoami", "die"}
    assert advertised["add"]["inputSchema"]["required"] == ["a", "b"]
    assert "5" in str(second.messages)  # the model saw the MCP result


async def test_a_failing_mcp_tool_is_a_model_visible_error(server_of: Any, state: Path) -> None:
    h = harness(
        [ScriptedStep.call("fail", {"message": "disk full"}), ScriptedStep.reply("sorry")],
        tools=[],
        mcp_servers=[server_of()],
    )
    assert (await h.run()).status == "completed"
    [part] = _parts(h, "tool-fail")
    assert part["state"] == "output-error"
    assert part["errorText"] == "Error executing tool fail: disk full"
    assert "disk full" in str(h.model.requests[1].messages)


async def test_arguments_against_the_schema_fail_before_the_server_is_called(
    server_of: Any, state: Path
) -> None:
    h = harness(
        [ScriptedStep.call("add", {"a": "two"}), ScriptedStep.reply("oops")],
        tools=[],
        mcp_servers=[server_of()],
    )
    assert (await h.run()).status == "completed"
    [part] = _parts(h, "tool-add")
    assert part["state"] == "output-error" and "Invalid input for tool add" in part["errorText"]
    assert calls(state) == []


class _Sources(AgentLifecycle):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def before_tool_call(self, input: Any) -> None:
        self.seen.append(("before", input.tool.name, input.tool.source))

    def after_tool_result(self, input: Any) -> None:
        self.seen.append(("after", input.tool.name, input.tool.source))


async def test_tool_hooks_see_source_mcp(server_of: Any, state: Path) -> None:
    """LC-132: before_tool_call / after_tool_result name the tool's source."""
    sources = _Sources()
    h = harness(
        [
            ScriptedStep.call("echo", {"text": "hi"}, id="e1"),
            ScriptedStep.call("lookup", {"q": "x"}, id="l1"),
            ScriptedStep.reply("ok"),
        ],
        parts=[sources],
        tools=[lookup],
        mcp_servers=[server_of()],
    )
    assert (await h.run()).status == "completed"
    assert sources.seen == [
        ("before", "echo", "mcp"),
        ("after", "echo", "mcp"),
        ("before", "lookup", "backend"),
        ("after", "lookup", "backend"),
    ]


async def test_a_changed_tool_list_is_seen_by_the_next_run(server_of: Any, state: Path) -> None:
    server = server_of()
    first = harness([ScriptedStep.reply("no multiply")], tools=[], mcp_servers=[server])
    assert (await first.run()).status == "completed"
    assert "multiply" not in {s["name"] for s in first.model.requests[0].tools}
    (state / "with-multiply").write_text("1")
    second = harness(
        [ScriptedStep.call("multiply", {"a": 6, "b": 7}), ScriptedStep.reply("42")],
        tools=[],
        mcp_servers=[server],
    )
    assert (await second.run()).status == "completed"
    assert "multiply" in {s["name"] for s in second.model.requests[0].tools}
    assert _parts(second, "tool-multiply")[0]["output"] == {"result": 42}


async def test_an_approval_required_mcp_tool_waits_then_runs_once(
    server_of: Any, state: Path
) -> None:
    h = harness(
        [ScriptedStep.call("add", {"a": 1, "b": 1}, id="a1"), ScriptedStep.reply("2")],
        tools=[],
        mcp_servers=[server_of(needs_approval={"add"})],
    )
    assert (await h.run()).status == "waiting"
    assert _parts(h, "tool-add")[0]["state"] == "approval-requested"
    assert calls(state) == []
    h.store.respond(h.run_id, "a1", approved=True)
    assert (await h.run()).status == "completed"
    assert calls(state) == [{"tool": "add", "arguments": {"a": 1, "b": 1}}]
    assert _parts(h, "tool-add")[0]["output"] == {"result": 2}


async def test_a_slow_call_past_its_timeout_is_a_model_visible_error(
    server_of: Any, state: Path
) -> None:
    h = harness(
        [ScriptedStep.call("slow", {"tag": "t"}), ScriptedStep.reply("too slow")],
        tools=[],
        mcp_servers=[server_of(call_timeout=0.5)],
    )
    try:
        assert (await h.run()).status == "completed"
    finally:
        release(state, "t")
    [part] = _parts(h, "tool-slow")
    assert part["errorText"] == "MCP tool slow did not answer within 0.5 s."


async def test_cancelling_a_run_settles_its_mcp_call(server_of: Any, state: Path) -> None:
    h = harness([ScriptedStep.call("slow", {"tag": "c"})], tools=[], mcp_servers=[server_of()])
    signal = AbortSignal()
    claim = await h.store.claim_run(h.run_id, owner="w", lease_seconds=30)
    from pai_agents import RunEngine

    task = asyncio.create_task(
        RunEngine(agent=h.agent, store=h.store).run_episode(claim, signal=signal)
    )
    await _wait_for(state / "started-c")
    signal.abort("cancel")
    try:
        assert (await asyncio.wait_for(task, 20)).status == "cancelled"
    finally:
        release(state, "c")
    [part] = _parts(h, "tool-slow")
    assert part["toolMetadata"] == {"pai": {"source": "cancel"}}


async def test_headers_reach_the_server_only_when_configured(http_url: str, state: Path) -> None:
    """docs/mcp.md, Security: nothing about the caller is sent unless a headers callable
    puts it there; the callable gets the run's identity."""
    plain = harness(
        [ScriptedStep.call("whoami", {}), ScriptedStep.reply("x")],
        tools=[],
        mcp_servers=[http_server(http_url)],
    )
    assert (await plain.run()).status == "completed"
    assert _parts(plain, "tool-whoami")[0]["output"] == {"result": "nobody"}
    seen: list[Any] = []

    def headers(run: Any) -> dict[str, str]:
        seen.append(run)
        return {"X-Pai-User": f"user-{run.thread_id[-4:]}"}

    forwarded = harness(
        [ScriptedStep.call("whoami", {}), ScriptedStep.reply("x")],
        tools=[],
        mcp_servers=[http_server(http_url, headers=headers)],
    )
    assert (await forwarded.run()).status == "completed"
    [run] = seen
    assert run.run_id == forwarded.run_id and run.identity == {}
    expected = f"user-{forwarded.thread_id[-4:]}"
    assert _parts(forwarded, "tool-whoami")[0]["output"] == {"result": expected}


async def test_a_stdio_server_dying_mid_call_is_a_model_visible_error(state: Path) -> None:
    """The session breaks, not the run: the call fails visibly and the run goes on."""
    h = harness(
        [ScriptedStep.call("die", {}), ScriptedStep.reply("it crashed")],
        tools=[],
        mcp_servers=[stdio_server(state, call_timeout=20)],
    )
    assert (await asyncio.wait_for(h.run(), 15)).status == "completed"
    [part] = _parts(h, "tool-die")
    assert part["state"] == "output-error"
    assert part["errorText"] == "MCP server local closed the connection during the call to die."
    assert h.assistant()[-1]["parts"][-1]["text"] == "it crashed"


class _Reports:
    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def __call__(self, report: Any) -> None:
        self.errors.append(report.error)


async def test_a_server_that_is_down_fails_the_run_with_a_typed_error(state: Path) -> None:
    reports = _Reports()
    down = [
        MCPServer.stdio("gone", command="/nonexistent/mcp-server"),
        MCPServer.http("closed", url=f"http://127.0.0.1:{free_port()}/mcp", connect_timeout=3),
    ]
    for server in down:
        h = harness(
            [ScriptedStep.reply("never")], tools=[], mcp_servers=[server], on_runtime_error=reports
        )
        outcome = await h.run()
        assert outcome.status == "failed"
        assert outcome.error is not None and outcome.error["type"] == "MCPServerUnavailable"
        assert h.model.requests == []
    assert [type(e) for e in reports.errors] == [MCPServerUnavailable] * 2
    assert "'gone' is unavailable" in str(reports.errors[0])


async def test_an_optional_server_that_is_down_leaves_the_run_without_its_tools(
    state: Path,
) -> None:
    h = harness(
        [ScriptedStep.reply("fine")],
        tools=[lookup],
        mcp_servers=[MCPServer.stdio("gone", command="/nonexistent/mcp", optional=True)],
    )
    assert (await h.run()).status == "completed"
    assert [s["name"] for s in h.model.requests[0].tools] == ["lookup"]


async def test_a_tool_name_two_tools_would_share_fails_the_run(state: Path) -> None:
    from pai_agents import tool
    from tests.support.engine_harness import Args

    echo = tool("echo", input=Args, execute=lambda a: "local")
    reports = _Reports()
    h = harness(
        [ScriptedStep.reply("x")],
        tools=[echo],
        mcp_servers=[stdio_server(state)],
        on_runtime_error=reports,
    )
    assert (await h.run()).status == "failed"
    assert isinstance(reports.errors[0], MCPToolConflict)
    prefixed = harness(
        [ScriptedStep.call("m_echo", {"text": "a"}), ScriptedStep.reply("x")],
        tools=[echo],
        mcp_servers=[stdio_server(state, prefix="m_")],
    )
    assert (await prefixed.run()).status == "completed"
    assert _parts(prefixed, "tool-m_echo")[0]["output"] == {"result": "echo: a"}


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_call_cut_off_by_a_dead_worker_is_resent_only_when_idempotent(
    server_of: Any, state: Path, idempotent: bool
) -> None:
    """At most once: the worker died mid-call (its task is gone, its lease expires); the
    next episode settles the call as a recovery error, or sends it again if declared
    idempotent."""
    h = harness(
        [ScriptedStep.call("slow", {"tag": "k"}, id="k1"), ScriptedStep.reply("after")],
        tools=[],
        mcp_servers=[server_of(idempotent=idempotent)],
    )
    claim = await h.store.claim_run(h.run_id, owner="dead", lease_seconds=30)
    from pai_agents import RunEngine

    task = asyncio.create_task(RunEngine(agent=h.agent, store=h.store).run_episode(claim))
    await _wait_for(state / "started-k")
    task.cancel()  # the worker is gone mid-call
    with pytest.raises(asyncio.CancelledError):
        await task
    _expire(h)
    release(state, "k")
    assert (await h.run()).status == "completed"
    [part] = _parts(h, "tool-slow")
    if idempotent:
        assert len(calls(state)) == 2 and part["output"] == {"result": "released k"}
    else:
        assert len(calls(state)) == 1
        assert part["state"] == "output-error"
        assert part["toolMetadata"] == {"pai": {"source": "recovery"}}
    assert "after" in str(h.assistant()[-1])


def _expire(h: Harness) -> None:
    from datetime import UTC, datetime, timedelta

    h.store.runs[h.run_id].lease_expires_at = datetime.now(UTC) - timedelta(seconds=1)


async def _wait_for(path: Path, seconds: float = 20) -> None:
    for _ in range(int(seconds / 0.05)):
        if path.exists():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path.name} never appeared")
