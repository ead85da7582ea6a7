"""ToolData on the in-memory engine: records a tool writes while it runs, joined onto its part.

Each test runs RunEngine with InMemoryThreadStore and a RecordingSink, then checks the stored
step message (reserved ``data-pai-tool-data`` parts), the published chunks, and the client
projection (``project_tool_data``, mirrored by ``static/pai/reducer.js``).
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pai_agents import (
    InMemoryThreadStore,
    RecordingSink,
    RunEngine,
    ScriptedModel,
    ScriptedStep,
    ToolContext,
    define_agent,
    tool,
)
from pai_agents.abort import AbortSignal
from pai_agents.lifecycle import AgentLifecycle, ReplaceInput, ReplaceOutput
from pai_agents.messages.chunks import InvalidChunk, validate_chunk
from pai_agents.messages.reducer import reduce_chunks
from pai_agents.messages.tool_data import TOOL_DATA_PART, project_tool_data, tool_data_chunk
from pai_agents.tool_data import ToolData, ToolDataClosed

pytestmark = pytest.mark.filterwarnings("error")

STATIC = Path(__file__).resolve().parents[3] / "pai_threads" / "static" / "pai"


class Job(BaseModel):
    rows: int = 3


# Set by a test to pause a tool mid-run; ``reached`` is set once it is waiting.
gate: dict[str, asyncio.Event] = {}


@tool(input=Job)
async def import_rows(args: Job, ctx: ToolContext) -> dict[str, Any]:
    """Import rows, reporting progress (one retained record) and a log (one per row)."""
    for row in range(args.rows):
        await ctx.data.write("progress", {"pct": 100 * row // args.rows}, id="main")
        await ctx.data.write("log", f"row {row}")
        await ctx.data.write("preview", {"row": row}, id="live", transient=True)
    if "release" in gate:
        gate["reached"].set()
        await gate["release"].wait()
    await ctx.data.write("progress", {"pct": 100}, id="main")
    return {"imported": args.rows}


@tool(input=Job)
def sync_rows(args: Job, ctx: ToolContext) -> int:
    """A sync tool (a worker thread) writes with write_sync."""
    for row in range(args.rows):
        ctx.data.write_sync("progress", {"pct": row}, id="main")
    ctx.data.write_sync("step", "done", transient=True)
    return args.rows


@tool(input=Job)
async def wrong_write(args: Job, ctx: ToolContext) -> str:
    """Tries write_sync from the event loop, then an invalid value."""
    with pytest.raises(RuntimeError, match=r"awaits ctx\.data\.write"):
        ctx.data.write_sync("progress", {"pct": 1})
    with pytest.raises(ValueError, match="finite"):
        await ctx.data.write("progress", {"pct": math.nan})
    with pytest.raises(ValueError, match="channel"):
        await ctx.data.write("__proto__", 1)
    return "checked"


@tool(input=Job, needs_approval=True)
async def approved_import(args: Job, ctx: ToolContext) -> str:
    """Runs after a person approves it (a generation that continues a committed message)."""
    await ctx.data.write("progress", {"pct": 50}, id="main")
    await ctx.data.write("progress", {"pct": 100}, id="main")
    return "imported"


TOOLS = [import_rows, sync_rows, wrong_write, approved_import]


@pytest.fixture(autouse=True)
def _reset() -> None:
    gate.clear()


def _setup(
    steps: list[ScriptedStep], lifecycle: Any = None
) -> tuple[InMemoryThreadStore, str, str, Any]:
    agent = define_agent(
        "td",
        instructions="x",
        model=ScriptedModel(steps=steps),
        tools=TOOLS,
        lifecycle=lifecycle,
    )
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="s", agent_name="td")
    run_id = store.send(
        thread_id, {"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]}
    )
    return store, thread_id, run_id, agent


async def _episode(store: InMemoryThreadStore, run_id: str, agent: Any, sink: Any, **engine: Any):
    claim = await store.claim_run(run_id, owner="w", lease_seconds=30)
    return await RunEngine(agent=agent, store=store, sink=sink, **engine).run_episode(claim)


def _call(name: str, call_id: str, rows: int = 3) -> list[Any]:
    return list(ScriptedStep.call(name, {"rows": rows}, id=call_id).tool_calls)


def _tool_part(message: dict[str, Any], call_id: str) -> dict[str, Any]:
    return next(p for p in message["parts"] if p.get("toolCallId") == call_id)


async def _run_import(**engine: Any) -> tuple[InMemoryThreadStore, str, RecordingSink]:
    store, thread_id, run_id, agent = _setup(
        [ScriptedStep(tool_calls=_call("import_rows", "c1")), ScriptedStep.reply("done")]
    )
    sink = RecordingSink()
    assert (await _episode(store, run_id, agent, sink, **engine)).status == "completed"
    return store, thread_id, sink


async def test_mf_012_mf_019_records_are_grouped_on_their_tool_part_by_channel() -> None:
    """MF-011, MF-012, MF-019: the projection removes the reserved parts and gives the tool
    part ``data[channel]``, each a list of ``{id, value}`` in write order; the stored
    message keeps native reserved data parts that the published chunks fold into (MF-027)."""
    store, thread_id, sink = await _run_import()
    step = store.thread_messages(thread_id)[1]

    assert reduce_chunks(sink.chunks(step["id"])) == step
    reserved = [p for p in step["parts"] if p["type"] == TOOL_DATA_PART]
    assert [p["data"]["channel"] for p in reserved] == ["progress", "log", "log", "log"]

    projected = project_tool_data(step)
    assert not any(p["type"].startswith("data-pai-") for p in projected["parts"])
    part = _tool_part(projected, "c1")
    assert part["state"] == "output-available" and part["output"] == {"imported": 3}
    assert set(part["data"]) == {"progress", "log"}  # the transient channel is not stored
    assert part["data"]["progress"] == [{"id": "main", "value": {"pct": 100}}]
    assert [r["value"] for r in part["data"]["log"]] == ["row 0", "row 1", "row 2"]
    assert all(r["id"].startswith("tdr_") for r in part["data"]["log"])
    # The native tool part is untouched in storage: records live beside it.
    assert "data" not in _tool_part(step, "c1")


async def test_mf_022_a_retained_record_replaces_its_value_in_place() -> None:
    """MF-022: identity is (toolCallId, channel, id); writing the same triple again replaces
    the value and keeps the first position, on the wire and in storage."""
    store, thread_id, sink = await _run_import()
    step = store.thread_messages(thread_id)[1]

    chunks = [c for c in sink.chunks(step["id"]) if c["type"] == TOOL_DATA_PART]
    progress = [c for c in chunks if c["data"]["channel"] == "progress"]
    assert [c["data"]["value"]["pct"] for c in progress] == [0, 33, 66, 100]
    assert len({c["id"] for c in progress}) == 1  # one identity, written four times
    reserved = [p for p in step["parts"] if p["type"] == TOOL_DATA_PART]
    assert reserved[0]["data"] == {
        "toolCallId": "c1",
        "channel": "progress",
        "id": "main",
        "value": {"pct": 100},
    }
    for chunk in chunks:
        validate_chunk(chunk)


async def test_mf_021_transient_records_are_published_but_never_stored() -> None:
    """MF-021: transient records are published live (``transient: true``) before the
    call's result and are absent from the stored message and its projection."""
    store, thread_id, sink = await _run_import()
    step = store.thread_messages(thread_id)[1]
    chunks = sink.chunks(step["id"])

    kinds = [(c["type"], c.get("transient", False)) for c in chunks]
    transient = [c for c in chunks if c.get("transient") is True]
    assert [c["data"]["value"] for c in transient] == [{"row": 0}, {"row": 1}, {"row": 2}]
    assert all(c["type"] == TOOL_DATA_PART and c["data"]["channel"] == "preview" for c in transient)
    result = kinds.index(("tool-output-available", False))
    assert max(i for i, c in enumerate(chunks) if c["type"] == TOOL_DATA_PART) < result
    assert "preview" not in json.dumps(step)
    assert "preview" not in _tool_part(project_tool_data(step), "c1")["data"]


async def test_mf_020_mf_030_durable_records_are_checkpointed_while_the_tool_runs() -> None:
    """MF-020, MF-030: while the tool still runs, its durable records are already in the
    stored step message (a refresh sees them), transient ones are not; a worker that dies
    then leaves them for recovery, which settles the call and keeps the records."""
    gate.update(reached=asyncio.Event(), release=asyncio.Event())
    store, thread_id, run_id, agent = _setup(
        [ScriptedStep(tool_calls=_call("import_rows", "c1")), ScriptedStep.reply("recovered")]
    )
    episode = asyncio.ensure_future(
        _episode(store, run_id, agent, RecordingSink(), checkpoint_seconds=0)
    )
    await asyncio.wait_for(gate["reached"].wait(), 5)

    step = store.thread_messages(thread_id)[1]
    part = _tool_part(project_tool_data(step), "c1")
    assert part["state"] == "input-available"
    assert part["data"]["progress"] == [{"id": "main", "value": {"pct": 66}}]
    assert len(part["data"]["log"]) == 3 and "preview" not in part["data"]

    # The worker dies mid-tool (its lease lapses); another one recovers the run.
    episode.cancel()
    with pytest.raises(asyncio.CancelledError):
        await episode
    store.runs[run_id].lease_expires_at = datetime.now(UTC) - timedelta(seconds=1)
    recovered = await _episode(store, run_id, agent, RecordingSink())
    assert recovered.status == "completed"
    step = store.thread_messages(thread_id)[1]
    part = _tool_part(project_tool_data(step), "c1")
    assert part["state"] == "output-error"
    assert part["toolMetadata"] == {"pai": {"source": "recovery"}}
    assert part["data"]["progress"] == [{"id": "main", "value": {"pct": 66}}]
    assert [r["value"] for r in part["data"]["log"]] == ["row 0", "row 1", "row 2"]


async def test_checkpoints_are_throttled_and_the_result_commit_stores_the_rest() -> None:
    """With the default cadence, only the first durable write is stored at once (later ones
    wait for the next checkpoint or the result's commit), and the final message has all."""
    updates: list[int] = []
    store, thread_id, run_id, agent = _setup(
        [ScriptedStep(tool_calls=_call("import_rows", "c1", rows=5)), ScriptedStep.reply("ok")]
    )
    original = store.update_message

    async def counting(lease: Any, *, message: Any, outcome: Any = None) -> None:
        updates.append(sum(p["type"] == TOOL_DATA_PART for p in message["parts"]))
        await original(lease, message=message, outcome=outcome)

    store.update_message = counting  # type: ignore[method-assign]
    assert (await _episode(store, run_id, agent, RecordingSink())).status == "completed"
    # One checkpoint at the first durable write, then the result's update.
    assert updates == [1, 6]
    part = _tool_part(project_tool_data(store.thread_messages(thread_id)[1]), "c1")
    assert part["data"]["progress"] == [{"id": "main", "value": {"pct": 100}}]
    assert len(part["data"]["log"]) == 5


class ToolPolicy(AgentLifecycle):
    """A tool policy: rewrites the input before, and the output after, each call."""

    def before_tool_call(self, input: Any) -> Any:
        return ReplaceInput({**input.input, "rows": 2})

    def after_tool_result(self, input: Any) -> Any:
        return ReplaceOutput({"checked": input.result.output})


class LiveSink(RecordingSink):
    """Records events and wakes the test when the first ToolData chunk is published."""

    def __init__(self) -> None:
        super().__init__()
        self.first_record = asyncio.Event()

    async def publish(self, event: dict[str, Any]) -> None:
        await super().publish(event)
        chunk = event.get("chunk") or {}
        if chunk.get("type") == TOOL_DATA_PART:
            self.first_record.set()


async def test_th_037_records_stream_before_the_final_value_with_a_tool_policy() -> None:
    """TH-037: with before_tool_call and after_tool_result installed, a tool's records are
    published while it runs (the tool waits until a subscriber has seen the first one), in
    order before its result, and the policy still decides the final value."""
    gate.update(reached=asyncio.Event(), release=asyncio.Event())
    store, thread_id, run_id, agent = _setup(
        [ScriptedStep(tool_calls=_call("import_rows", "c1", rows=5)), ScriptedStep.reply("done")],
        lifecycle=ToolPolicy(),
    )
    sink = LiveSink()
    episode = asyncio.ensure_future(_episode(store, run_id, agent, sink))
    await asyncio.wait_for(sink.first_record.wait(), 5)
    await asyncio.wait_for(gate["reached"].wait(), 5)
    live = [c for c in sink.chunks() if c["type"] == TOOL_DATA_PART]
    assert [c["data"]["channel"] for c in live][:3] == ["progress", "log", "preview"]
    assert not any(c["type"] == "tool-output-available" for c in sink.chunks())
    gate["release"].set()
    assert (await episode).status == "completed"

    step = store.thread_messages(thread_id)[1]
    chunks = sink.chunks(step["id"])
    result = next(i for i, c in enumerate(chunks) if c["type"] == "tool-output-available")
    assert all(i < result for i, c in enumerate(chunks) if c["type"] == TOOL_DATA_PART)
    assert reduce_chunks(chunks) == step
    part = _tool_part(project_tool_data(step), "c1")
    # ReplaceInput ran the tool with two rows; ReplaceOutput is the final value.
    assert part["output"] == {"checked": {"imported": 2}}
    assert [r["value"] for r in part["data"]["log"]] == ["row 0", "row 1"]
    assert part["data"]["progress"] == [{"id": "main", "value": {"pct": 100}}]


async def test_sync_tools_write_with_write_sync_and_misuse_is_refused() -> None:
    """A sync tool's writes come back to the run's loop; an async tool cannot block on
    write_sync, and bad channels or values are refused without ending the call."""
    store, thread_id, run_id, agent = _setup(
        [
            ScriptedStep(tool_calls=[*_call("sync_rows", "s1"), *_call("wrong_write", "w1")]),
            ScriptedStep.reply("done"),
        ]
    )
    sink = RecordingSink()
    assert (await _episode(store, run_id, agent, sink)).status == "completed"
    step = store.thread_messages(thread_id)[1]
    projected = project_tool_data(step)
    assert _tool_part(projected, "s1")["data"] == {
        "progress": [{"id": "main", "value": {"pct": 2}}]
    }
    assert _tool_part(projected, "w1")["output"] == "checked"
    assert "data" not in _tool_part(projected, "w1")
    assert any(c.get("transient") and c["data"]["value"] == "done" for c in sink.chunks())
    assert reduce_chunks(sink.chunks(step["id"])) == step


async def test_an_approved_call_writes_into_the_continued_generation() -> None:
    """A call executed after its approval (a new episode continuing the committed message)
    writes its records into that message, with and without a tool policy."""
    for lifecycle in (None, ToolPolicy()):
        store, thread_id, run_id, agent = _setup(
            [ScriptedStep(tool_calls=_call("approved_import", "a1")), ScriptedStep.reply("ok")],
            lifecycle=lifecycle,
        )
        assert (await _episode(store, run_id, agent, RecordingSink())).status == "waiting"
        store.respond(run_id, "a1", approved=True)
        sink = RecordingSink()
        assert (await _episode(store, run_id, agent, sink)).status == "completed"
        step = store.thread_messages(thread_id)[1]
        part = _tool_part(project_tool_data(step), "a1")
        assert part["data"] == {"progress": [{"id": "main", "value": {"pct": 100}}]}
        chunks = sink.chunks(step["id"])
        assert chunks[0]["type"] == "start"
        assert sum(c["type"] == TOOL_DATA_PART for c in chunks) == 2


async def test_writes_end_with_the_call_and_a_detached_writer_keeps_them() -> None:
    """A writer is closed once its call has a result; one made by hand (testing a tool
    without a run) keeps the latest record of each identity."""
    writer = ToolData("c9")
    first = await writer.write("log", "a")
    writer.write_sync("progress", {"pct": 5}, id="main")
    await writer.write("progress", {"pct": 9}, id="main")
    assert [(k, r.value) for k, r in writer.records.items()] == [
        (("log", first), "a"),
        (("progress", "main"), {"pct": 9}),
    ]
    writer.close()
    with pytest.raises(ToolDataClosed):
        await writer.write("log", "late")

    context = ToolContext(
        tool_call_id="c1",
        tool_name="t",
        run_id="r",
        thread_id="t",
        identity={},
        runtime_context=None,
        signal=AbortSignal(),
    )
    await context.data.write("progress", {"pct": 1}, transient=True)
    assert [r.transient for r in context.data.records.values()] == [True]


def test_the_chunk_validator_accepts_tool_data_chunks_and_rejects_malformed_ones() -> None:
    """The reserved chunk passes the SDK schema and PAI's own shape check."""
    validate_chunk(tool_data_chunk("c1", "progress", "main", {"pct": 1}))
    validate_chunk(tool_data_chunk("c1", "log", "x", "line", transient=True))
    good = tool_data_chunk("c1", "progress", "main", 1)
    for bad in (
        {**good, "id": "other"},
        {**good, "data": {**good["data"], "channel": "__proto__"}},
        {**good, "data": {**good["data"], "extra": 1}},
        {**good, "data": "x"},
    ):
        with pytest.raises(InvalidChunk):
            validate_chunk(bad)


_NODE_FOLD = """
import { MessageReducer, projectToolData } from "%s";
let text = "";
for await (const data of process.stdin) text += data;
const chunks = JSON.parse(text);
const reducer = new MessageReducer({ id: "", role: "assistant", parts: [] });
const views = [];
for (const chunk of chunks) {
  reducer.apply(chunk);
  views.push(projectToolData(structuredClone(reducer.message)));
}
console.log(JSON.stringify({ final: reducer.message, views }));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_the_browser_reducer_shows_records_live_and_ends_as_the_server() -> None:
    """MF-019, MF-021, MF-027 in static/pai/reducer.js: while the call runs the browser
    shows transient records as ``transient: true`` overlays; once it completes they are
    gone, and its fold and projection equal the stored message and the server's projection."""
    store, thread_id, sink = await _run_import()
    step = store.thread_messages(thread_id)[1]
    chunks = sink.chunks(step["id"])
    script = _NODE_FOLD % (STATIC / "reducer.js").as_uri()
    folded = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        input=json.dumps(chunks),
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    out = json.loads(folded.stdout)
    assert out["final"] == step
    result = next(i for i, c in enumerate(chunks) if c["type"] == "tool-output-available")
    before = _tool_part(out["views"][result - 1], "c1")["data"]
    assert before["preview"] == [{"id": "live", "value": {"row": 2}, "transient": True}]
    assert before["progress"] == [{"id": "main", "value": {"pct": 100}}]
    after = out["views"][-1]
    assert after == project_tool_data(step)
    assert "preview" not in _tool_part(after, "c1")["data"]
