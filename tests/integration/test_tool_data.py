"""ToolData on the real database: stored reserved parts, and the client projections (HTTP
API, websocket snapshot, realtime events) that join them onto their tool parts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from pydantic import BaseModel

from pai_agents import (
    RecordingSink,
    RunEngine,
    ScriptedModel,
    ScriptedStep,
    ToolContext,
    define_agent,
    tool,
)
from pai_agents.lifecycle import AgentLifecycle, ReplaceOutput
from pai_agents.messages import reduce_chunks, validate_chunk
from pai_agents.messages.tool_data import TOOL_DATA_PART, project_tool_data
from pai_threads import services
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, Run
from pai_threads.store.thread_store import ORMThreadStore
from pai_threads.websocket.snapshot import build_snapshot
from tests.support.realtime import recv, recv_until, server_fixture
from tests.support.server import Browser, DaphneServer
from tests.support.thread_state import ThreadState

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"

# Set by a test to pause ``crunch`` mid-run: ``reached`` once it waits on ``release``.
gate: dict[str, asyncio.Event] = {}


class Job(BaseModel):
    rows: int = 2


@tool(input=Job)
async def crunch(args: Job, ctx: ToolContext) -> dict[str, int]:
    """Writes durable progress and a log, and a transient preview, while it works."""
    await ctx.data.write("progress", {"pct": 50}, id="main")
    for row in range(args.rows):
        await ctx.data.write("log", f"row {row}")
    await ctx.data.write("preview", {"draft": "..."}, id="live", transient=True)
    if "release" in gate:
        gate["reached"].set()
        await gate["release"].wait()
    await ctx.data.write("progress", {"pct": 100}, id="main")
    return {"rows": args.rows}


class Checked(AgentLifecycle):
    """A tool policy on the result (after_tool_result)."""

    def after_tool_result(self, input: Any) -> Any:
        return ReplaceOutput({"checked": input.result.output})


def _agent(name: str, lifecycle: Any = None) -> Any:
    steps = [ScriptedStep.call("crunch", {"rows": 2}, id="c1"), ScriptedStep.reply("done")]
    return define_agent(
        name,
        instructions="x",
        model=ScriptedModel(steps=steps),
        tools=[crunch],
        lifecycle=lifecycle,
    )


def _register(monkeypatch: pytest.MonkeyPatch, agent: Any) -> None:
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)


@pytest.fixture(autouse=True)
def _reset() -> None:
    gate.clear()


def _assistant(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in messages if m["role"] == "assistant")


def _tool_part(message: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in message["parts"] if p.get("toolCallId") == "c1")


def _no_raw_parts(messages: list[dict[str, Any]]) -> bool:
    return not any(p["type"].startswith("data-pai-") for m in messages for p in m["parts"])


def test_mf_020_mf_021_a_refresh_shows_durable_records_not_transient_ones(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MF-020, MF-021, MF-030: a snapshot taken while the tool runs (a refresh) already has
    the durable records checkpointed so far and not the transient one; after the run the
    snapshot has every durable record, still no transient one, and no raw reserved part."""
    agent = _agent("td-orm", Checked())
    _register(monkeypatch, agent)
    thread = services.create_thread(alice, agent="td-orm")
    run = services.send(
        alice, thread.id, {"parts": [{"type": "text", "text": "go"}]}, dispatch=False
    ).run
    gate.update(reached=asyncio.Event(), release=asyncio.Event())

    async def scenario() -> tuple[dict[str, Any], RecordingSink]:
        store = ORMThreadStore()
        sink = RecordingSink()
        claim = await store.claim_run(run.id, owner="w1", lease_seconds=30)
        engine = RunEngine(agent=agent, store=store, sink=sink, checkpoint_seconds=0)
        episode = asyncio.ensure_future(engine.run_episode(claim))
        await asyncio.wait_for(gate["reached"].wait(), 10)
        during = await sync_to_async(build_snapshot)(alice, thread.id)
        gate["release"].set()
        assert (await episode).status == "completed"
        return during, sink

    during, sink = asyncio.run(scenario())

    assert _no_raw_parts(during["messages"])
    part = _tool_part(_assistant(during["messages"]))
    assert part["state"] == "input-available"
    assert part["data"]["progress"] == [{"id": "main", "value": {"pct": 50}}]
    assert [r["value"] for r in part["data"]["log"]] == ["row 0", "row 1"]
    assert "preview" not in part["data"]

    after = build_snapshot(alice, thread.id)
    assert _no_raw_parts(after["messages"])
    part = _tool_part(_assistant(after["messages"]))
    assert part["output"] == {"checked": {"rows": 2}}
    assert part["data"]["progress"] == [{"id": "main", "value": {"pct": 100}}]
    assert set(part["data"]) == {"progress", "log"}

    row = Message.objects.get(thread=thread, message_id=_assistant(after["messages"])["id"])
    assert sum(p["type"] == TOOL_DATA_PART for p in row.parts) == 3  # stored natively
    assert reduce_chunks(sink.chunks(row.message_id))["parts"] == row.parts
    assert project_tool_data(row.to_ui_message())["parts"] == _assistant(after["messages"])["parts"]


def test_mf_012_mf_019_the_http_messages_api_joins_records_onto_tool_parts(
    api_client: Client, wait_for_run: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    """MF-011, MF-012, MF-019: ``GET /threads/{id}/messages`` shows the records on their tool
    part by channel, in write order, and never the reserved parts (a run on the executor)."""
    _register(monkeypatch, _agent("td-api"))
    thread = api_client.post(
        f"{API}/threads", data=json.dumps({"agent": "td-api"}), content_type="application/json"
    ).json()
    api_client.get("/")
    token = api_client.cookies["csrftoken"].value
    sent = api_client.post(
        f"{API}/threads/{thread['id']}/messages",
        data=json.dumps({"text": "go"}),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert sent.status_code == 202, sent.content
    assert wait_for_run(sent.json()["run"]["id"]).status == "completed"

    page = api_client.get(f"{API}/threads/{thread['id']}/messages").json()
    assert _no_raw_parts(page["messages"])
    part = _tool_part(_assistant(page["messages"]))
    assert part["type"] == "tool-crunch" and part["output"] == {"rows": 2}
    assert part["data"] == {
        "progress": [{"id": "main", "value": {"pct": 100}}],
        "log": [
            {"id": part["data"]["log"][0]["id"], "value": "row 0"},
            {"id": part["data"]["log"][1]["id"], "value": "row 1"},
        ],
    }


# -- the thread websocket, against a real server ------------------------------------------


server = server_fixture("tool-data")


def _is_record(frame: dict[str, Any], *, transient: bool) -> bool:
    chunk = frame.get("chunk") or {}
    return chunk.get("type") == TOOL_DATA_PART and chunk.get("transient", False) is transient


@pytest.mark.slow
async def test_mf_020_mf_021_realtime_records_and_refresh(
    server: DaphneServer, tmp_path: Path
) -> None:
    """TH-037, MF-020, MF-021, MF-027 over the websocket: records arrive as valid
    ``data-pai-tool-data`` chunks while the tool runs (transient ones marked), a client that
    connects meanwhile gets a snapshot with the durable records only, and after the run the
    committed message (``generation.finished``, a fresh snapshot) is the projected fold."""
    flag = tmp_path / "release"
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("reporter")
        state = ThreadState()
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced", sink=state.apply)
            await ws.send(json.dumps({"type": "send", "text": f"report {flag}"}))
            await recv_until(ws, lambda f: _is_record(f, transient=True), sink=state.apply)

            async with alice.websocket(thread_id) as refreshed:
                snapshot = await recv(refreshed)
            flag.touch()
            frames = await recv_until(
                ws,
                lambda f: f["type"] == "run.status" and f["status"] not in ("queued", "running"),
                sink=state.apply,
            )
        async with alice.websocket(thread_id) as late:
            final = await recv(late)

    assert snapshot["type"] == "snapshot"
    assert _no_raw_parts(snapshot["state"]["messages"])
    during = _tool_part(_assistant(snapshot["state"]["messages"]))
    assert during["state"] == "input-available"
    assert during["data"] == {"progress": [{"id": "main", "value": {"pct": 10}}]}

    events = [f for f in state.frames if f["type"] == "generation.message.chunk"]
    for event in events:
        validate_chunk(event["chunk"])
    finished = next(f for f in frames if f["type"] == "generation.finished")
    chunks = [e["chunk"] for e in events if e["messageId"] == finished["messageId"]]
    kinds = [c["type"] for c in chunks]
    assert kinds.index(TOOL_DATA_PART) < kinds.index("tool-output-available")
    transient = [c for c in chunks if c.get("transient") is True]
    assert [c["data"] for c in transient] == [
        {"toolCallId": "c1", "channel": "preview", "id": "live", "value": {"draft": "first lines"}}
    ]
    assert _no_raw_parts([finished["message"]])
    assert project_tool_data(reduce_chunks(chunks))["parts"] == finished["message"]["parts"]
    part = _tool_part(finished["message"])
    assert part["data"]["progress"] == [{"id": "main", "value": {"pct": 100}}]
    assert [r["value"] for r in part["data"]["log"]] == ["finished"]
    assert "preview" not in part["data"]

    assert _no_raw_parts(final["state"]["messages"])
    assert _tool_part(_assistant(final["state"]["messages"]))["data"] == part["data"]
    assert _tool_part(_assistant(state.messages))["data"] == part["data"]
