"""Message-format rules (MF-*) that hold without Django: the reducer and the run loop on the
in-memory store."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from pai_agents import (
    AbortSignal,
    InMemoryThreadStore,
    RecordingSink,
    RunEngine,
    RunOutcome,
    ScriptedModel,
    ScriptedStep,
    define_agent,
    tool,
)
from pai_agents.engine.memory import MemoryMessage
from pai_agents.messages import MessageReducer, ToolState, reduce_chunks, to_model_messages
from pai_agents.models.scripted import ScriptedToolCall
from pai_agents.tools import ToolContext

pytestmark = pytest.mark.filterwarnings("error")

NATIVE_TOOL_STATES = frozenset(get_args(ToolState))


class Args(BaseModel):
    q: str = ""


@tool(input=Args)
def lookup(args: Args) -> str:
    """Look something up."""
    return f"found {args.q}"


@tool(input=Args, needs_approval=True)
def wire(args: Args) -> str:
    """A person approves each call."""
    return "sent"


def _user(text: str, message_id: str = "u1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def _setup(agent_name: str) -> tuple[InMemoryThreadStore, str]:
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="s1", agent_name=agent_name)
    return store, store.send(thread_id, _user("hi"))  # type: ignore[arg-type]


async def _episode(
    store: InMemoryThreadStore,
    run_id: str,
    agent: Any,
    *,
    sink: RecordingSink | None = None,
    signal: AbortSignal | None = None,
) -> RunOutcome:
    claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
    engine = RunEngine(agent=agent, store=store, sink=sink or RecordingSink())
    return await engine.run_episode(claim, signal=signal)


def _messages(store: InMemoryThreadStore, run_id: str) -> list[dict[str, Any]]:
    return store.thread_messages(store.runs[run_id].thread_id)  # type: ignore[return-value]


def _tool_parts(store: InMemoryThreadStore, run_id: str) -> list[dict[str, Any]]:
    return [
        p
        for m in _messages(store, run_id)
        for p in m["parts"]
        if p["type"] == "dynamic-tool" or p["type"].startswith("tool-")
    ]


# --------------------------------------------------------------------------- granularity


async def test_mf_001_each_model_call_stores_exactly_one_assistant_message() -> None:
    """MF-001: a tool-calling step and an answering step are two model calls and two stored
    assistant messages, each with its own id."""
    model = ScriptedModel(steps=[ScriptedStep.call("lookup", {"q": "x"}), ScriptedStep.reply("ok")])
    agent = define_agent("g", instructions="x", model=model, tools=[lookup])
    store, run_id = _setup("g")
    assert (await _episode(store, run_id, agent)).status == "completed"

    assistants = [m for m in _messages(store, run_id) if m["role"] == "assistant"]
    assert len(model.requests) == 2
    assert len(assistants) == 2
    assert len({m["id"] for m in assistants}) == 2
    assert [s.message_id for s in store.steps[run_id]] == [m["id"] for m in assistants]


# --------------------------------------------------------------------------- native parts

_PM = {"acme": {"trace": "t1"}}
ALL_PART_CHUNKS: list[dict[str, Any]] = [
    {"type": "start", "messageId": "m1"},
    {"type": "start-step"},
    {"type": "reasoning-start", "id": "r1", "providerMetadata": _PM},
    {"type": "reasoning-delta", "id": "r1", "delta": "thinking"},
    {"type": "reasoning-end", "id": "r1"},
    {"type": "text-start", "id": "t1"},
    {"type": "text-delta", "id": "t1", "delta": "Hello", "providerMetadata": _PM},
    {"type": "text-end", "id": "t1"},
    {"type": "source-url", "sourceId": "s1", "url": "https://example.com", "title": "Ex"},
    {
        "type": "source-document",
        "sourceId": "s2",
        "mediaType": "application/pdf",
        "title": "Doc",
        "filename": "doc.pdf",
    },
    {"type": "file", "url": "https://example.com/a.png", "mediaType": "image/png"},
    {"type": "custom", "kind": "acme.widget", "providerMetadata": _PM},
    {
        "type": "tool-input-available",
        "toolCallId": "c1",
        "toolName": "lookup",
        "input": {"q": "x"},
        "providerMetadata": _PM,
        "toolMetadata": {"origin": "test"},
    },
    {"type": "tool-output-available", "toolCallId": "c1", "output": "found x"},
    {
        "type": "tool-input-available",
        "toolCallId": "c2",
        "toolName": "web_search",
        "input": {"query": "pai"},
        "dynamic": True,
        "providerExecuted": True,
    },
    {"type": "tool-output-available", "toolCallId": "c2", "output": {"hits": 3}},
    {"type": "data-report", "id": "d1", "data": {"done": True}},
    {"type": "finish-step"},
    {"type": "finish", "finishReason": "stop"},
]


def test_mf_009_native_parts_keep_their_types_fields_and_round_trip_unchanged() -> None:
    """MF-009: standard parts keep their native type names and fields, with provider and
    tool metadata on their owners; the folded message is strict JSON and refolding it from
    storage changes nothing."""
    message = reduce_chunks(ALL_PART_CHUNKS)

    types = [p["type"] for p in message["parts"]]
    assert types == [
        "step-start",
        "reasoning",
        "text",
        "source-url",
        "source-document",
        "file",
        "custom",
        "tool-lookup",
        "dynamic-tool",
        "data-report",
    ]
    parts = {p["type"]: p for p in message["parts"]}
    assert parts["reasoning"]["providerMetadata"] == _PM
    assert parts["text"] == {
        "type": "text",
        "text": "Hello",
        "providerMetadata": _PM,
        "state": "done",
    }
    assert parts["custom"] == {"type": "custom", "kind": "acme.widget", "providerMetadata": _PM}
    assert parts["tool-lookup"]["callProviderMetadata"] == _PM
    assert parts["tool-lookup"]["toolMetadata"] == {"origin": "test"}
    assert parts["dynamic-tool"]["toolName"] == "web_search"
    assert parts["dynamic-tool"]["providerExecuted"] is True
    assert parts["data-report"] == {"type": "data-report", "id": "d1", "data": {"done": True}}

    stored = json.loads(json.dumps(message, allow_nan=False))
    assert stored == message
    assert MessageReducer(stored).snapshot() == message  # resuming from storage: no change


async def test_mf_015_registered_tools_are_static_parts_and_unregistered_ones_dynamic() -> None:
    """MF-015: a registered tool's part is ``tool-{registration name}``; a tool the agent did
    not register (request-time/dynamic) is a ``dynamic-tool`` part naming ``toolName``."""
    model = ScriptedModel(
        steps=[
            ScriptedStep(
                tool_calls=[
                    ScriptedToolCall(name="lookup", input={"q": "a"}, id="c1"),
                    ScriptedToolCall(name="web_search", input={"query": "b"}, id="c2"),
                ]
            ),
            ScriptedStep.reply("ok"),
        ]
    )
    agent = define_agent("t", instructions="x", model=model, tools=[lookup])
    store, run_id = _setup("t")
    await _episode(store, run_id, agent)

    by_call = {p["toolCallId"]: p for p in _tool_parts(store, run_id)}
    assert by_call["c1"]["type"] == "tool-lookup" and "toolName" not in by_call["c1"]
    assert by_call["c2"]["type"] == "dynamic-tool"
    assert by_call["c2"]["toolName"] == "web_search"


def test_mf_016_native_approval_states_stay_on_the_tool_part() -> None:
    """MF-016: approval chunks (as a provider emits them) keep their native approval states
    and the approval record on the tool part."""
    chunks = [
        {"type": "start", "messageId": "m2"},
        {"type": "tool-input-available", "toolCallId": "c9", "toolName": "wire", "input": {}},
        {"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c9"},
    ]
    reducer = MessageReducer()
    for chunk in chunks:
        reducer.apply(chunk)
    part = reducer.message["parts"][-1]
    assert part["state"] == "approval-requested" and part["approval"] == {"id": "a1"}
    reducer.apply({"type": "tool-approval-response", "approvalId": "a1", "approved": False})
    assert part["state"] == "approval-responded"
    assert part["approval"] == {"id": "a1", "approved": False}
    reducer.apply({"type": "tool-output-denied", "toolCallId": "c9"})
    assert part["state"] == "output-denied" and part["approval"]["approved"] is False


async def test_mf_016_an_approval_request_is_stored_in_its_native_state() -> None:
    """MF-016: a call waiting for approval is stored as ``approval-requested`` with its
    approval id, and answered natively (``approval`` kept through the output)."""
    model = ScriptedModel(
        steps=[ScriptedStep.call("wire", {"q": "x"}, id="c1"), ScriptedStep.reply("ok")]
    )
    agent = define_agent("a", instructions="x", model=model, tools=[wire])
    store, run_id = _setup("a")
    assert (await _episode(store, run_id, agent)).status == "waiting"
    (part,) = _tool_parts(store, run_id)
    assert part["state"] == "approval-requested" and part["approval"]["id"]

    store.respond(run_id, "c1", approved=True)
    assert (await _episode(store, run_id, agent)).status == "completed"
    (part,) = _tool_parts(store, run_id)
    assert part["state"] == "output-available"
    assert part["approval"]["approved"] is True


async def test_mf_017_stored_tool_states_are_native_whatever_the_run_does() -> None:
    """MF-017: waiting, denied and cancelled calls are stored in native states only; PAI's
    running/waiting/cancelled notions are never written into a part."""
    states: list[str] = []

    # Waiting for approval, then denied.
    model = ScriptedModel(
        steps=[ScriptedStep.call("wire", {"q": "x"}, id="c1"), ScriptedStep.reply("ok")]
    )
    agent = define_agent("s", instructions="x", model=model, tools=[wire])
    store, run_id = _setup("s")
    assert (await _episode(store, run_id, agent)).status == "waiting"
    states += [p["state"] for p in _tool_parts(store, run_id)]
    store.respond(run_id, "c1", approved=False, reason="no")
    assert (await _episode(store, run_id, agent)).status == "completed"
    states += [p["state"] for p in _tool_parts(store, run_id)]

    # Cancelled while the tool runs.
    signal = AbortSignal()

    @tool(input=Args)
    async def cancelling(args: Args, ctx: ToolContext) -> str:
        """Cancels its run, then never finishes."""
        signal.abort("cancelled")
        await asyncio.Event().wait()
        return "never"

    model = ScriptedModel(steps=[ScriptedStep.call("cancelling", {}, id="c2")])
    agent = define_agent("s", instructions="x", model=model, tools=[cancelling])
    store, run_id = _setup("s")
    assert (await _episode(store, run_id, agent, signal=signal)).status == "cancelled"
    cancelled = _tool_parts(store, run_id)
    states += [p["state"] for p in cancelled]

    assert cancelled[0]["toolMetadata"] == {"pai": {"source": "cancel"}}
    assert states == ["approval-requested", "output-denied", "output-error"]
    assert set(states) <= NATIVE_TOOL_STATES
    assert not {"running", "waiting", "cancelled"} & set(states)


# --------------------------------------------------------------------------- recovery


async def test_mf_030_recovery_restarts_from_the_checkpoint_without_replaying_lost_tokens() -> None:
    """MF-030: a dead attempt left an open checkpoint; recovery repeats the step under the
    same message from committed state, announces the restart, and never replays tokens that
    were not checkpointed (the final text is the new attempt's only)."""
    model = ScriptedModel(steps=[ScriptedStep.reply("A fresh complete answer.")])
    agent = define_agent("r", instructions="x", model=model)
    store, run_id = _setup("r")
    dead = await store.claim_run(run_id, owner="dead", lease_seconds=30)
    partial = {
        "id": "m-open",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Half an ans", "state": "streaming"},
        ],
    }
    await store.checkpoint_message(dead.lease, message=partial, step_index=0)  # type: ignore[arg-type]
    # The dead worker's lease runs out (it wrote before that, LC-033).
    store.runs[run_id].lease_expires_at = datetime.now(UTC) - timedelta(seconds=1)

    sink = RecordingSink()
    outcome = await _episode(store, run_id, agent, sink=sink)

    assert outcome.status == "completed"
    started = [e for e in sink.events if e["type"] == "generation.started"]
    assert started[0]["messageId"] == "m-open" and started[0]["restarted"] is True
    _user_message, answer = _messages(store, run_id)
    assert answer["id"] == "m-open"
    text = "".join(p["text"] for p in answer["parts"] if p["type"] == "text")
    assert text == "A fresh complete answer."
    assert [m.status for m in store.messages] == ["committed", "committed"]


# --------------------------------------------------------------------------- model replay


async def test_mf_031_the_provider_gets_converted_context_visible_messages_only() -> None:
    """MF-031: before the call only context-visible messages are selected and converted with
    convert_to_model_messages; the stored messages are not changed by the conversion."""
    model = ScriptedModel(steps=[ScriptedStep.reply("ok")])
    agent = define_agent("c", instructions="x", model=model)
    store = InMemoryThreadStore()
    thread_id = store.create_thread(scope_key="s1", agent_name="c")
    earlier = [
        (_user("visible question", "e1"), True),
        ({"id": "e2", "role": "assistant", "parts": [{"type": "text", "text": "hidden"}]}, False),
        ({"id": "e3", "role": "assistant", "parts": [{"type": "text", "text": "shown"}]}, True),
    ]
    for message, in_context in earlier:
        store.messages.append(
            MemoryMessage(
                message=message,  # type: ignore[arg-type]
                thread_id=thread_id,
                run_id=None,
                position=len(store.messages),
                context=in_context,
            )
        )
    before = copy.deepcopy(store.thread_messages(thread_id))
    run_id = store.send(thread_id, _user("now", "u2"))  # type: ignore[arg-type]
    await _episode(store, run_id, agent)

    (request,) = model.requests
    visible = [m for m, in_context in earlier if in_context] + [_user("now", "u2")]
    assert request.messages == to_model_messages(visible)  # type: ignore[arg-type]
    assert "hidden" not in json.dumps(request.messages)
    assert store.thread_messages(thread_id)[:3] == before
