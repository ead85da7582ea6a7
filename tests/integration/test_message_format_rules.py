"""Message-format rules (MF-*) on the real database: stored rows, the client projections
(HTTP API, websocket snapshot) and the send boundary."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction
from pydantic import BaseModel

from pai_agents import (
    ModelRequest,
    RecordingSink,
    RunEngine,
    RunOutcome,
    ScriptedModel,
    ScriptedStep,
    define_agent,
    tool,
)
from pai_agents.lifecycle import InvalidLifecycleWrite, MetadataSchemas
from pai_agents.messages import reduce_chunks
from pai_threads import services
from pai_threads.errors import InvalidInput, NotFound
from pai_threads.execution import registry
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, QueueItem, Run, Step, Thread
from pai_threads.store.thread_store import ORMThreadStore
from pai_threads.websocket.snapshot import build_snapshot
from tests.support.step_commits import commit_only_step

pytestmark = pytest.mark.django_db(transaction=True)

PAI_KEYS = {"producer", "status", "createdAt", "updatedAt"}
ENVELOPE_WORDS = ("visibility", "in_context", "inContext", "in_transcript", "scope", "private")


def _thread(identity: Identity, agent: str | None = None) -> Thread:
    return services.create_thread(identity, agent=agent)


def _send(identity: Identity, thread_id: str, text: str, **options: Any) -> services.SendResult:
    message = {"role": "user", "parts": [{"type": "text", "text": text}], **options}
    return services.send(identity, thread_id, message, dispatch=False)


async def _execute(
    run_id: str, agent: Any, *, sink: RecordingSink | None = None, **engine: Any
) -> RunOutcome:
    """Run one episode of ``agent`` (any definition) on the ORM store."""
    store = ORMThreadStore()
    claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
    return await RunEngine(
        agent=agent, store=store, sink=sink or RecordingSink(), **engine
    ).run_episode(claim)


def _demo_run(identity: Identity, text: str = "What is 6 * 7?") -> tuple[Thread, Run]:
    """The demo agent answers with a calculator step and an answer step."""
    thread = _thread(identity)
    result = _send(identity, thread.id, text)
    outcome = asyncio.run(aexecute_run(result.run.id))
    assert outcome is not None and outcome.status == "completed"
    return thread, Run.objects.get(id=result.run.id)


def _register(monkeypatch: pytest.MonkeyPatch, agent: Any) -> None:
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)


# --------------------------------------------------------------------------- shape


def test_mf_003_mf_004_every_run_message_is_a_pai_message_naming_its_run(alice: Identity) -> None:
    """MF-003, MF-004: each message has exactly ``id``, ``role``, ``metadata`` and ``parts``;
    ``metadata.pai`` holds producer, status, createdAt, updatedAt, the ``runId`` of its run
    and its ``relation`` (the user input, the step outputs)."""
    thread, run = _demo_run(alice)
    messages = build_snapshot(alice, thread.id)["messages"]

    assert [m["role"] for m in messages] == ["user", "assistant", "assistant"]
    for message in messages:
        assert set(message) == {"id", "role", "metadata", "parts"}
        assert message["role"] in ("system", "user", "assistant")
        pai = message["metadata"]["pai"]
        assert set(pai) >= PAI_KEYS
        assert pai["runId"] == run.id
        datetime.fromisoformat(pai["createdAt"])
        datetime.fromisoformat(pai["updatedAt"])
    assert [m["metadata"]["pai"]["relation"] for m in messages] == ["input", "output", "output"]


@dataclass
class ProbeModel:
    """A LanguageModel that runs ``probe`` once, in the middle of its first text stream."""

    inner: ScriptedModel
    probe: Callable[[], Any]
    provider: str = "probe"
    model_id: str = "probe"
    probed: list[Any] = field(default_factory=list)

    async def stream(self, request: ModelRequest, *, signal: Any = None) -> Any:
        async for part in self.inner.stream(request, signal=signal):
            yield part
            if not self.probed and part["type"] == "text-delta":
                self.probed.append(await sync_to_async(self.probe)())


def test_mf_005_mf_006_producer_and_status_record_origin_and_commit_state(
    alice: Identity,
) -> None:
    """MF-005, MF-006: ``producer`` is ``send`` for the input, ``lifecycle`` for a facade
    append and ``model`` for a step; a streaming step is ``open`` (stored and visible) and
    ``committed`` afterwards; statuses and relations are only the documented values."""
    thread = _thread(alice)
    result = _send(alice, thread.id, "hello")

    def probe() -> dict[str, Any]:
        rows = list(Message.objects.filter(thread=thread).order_by("id"))
        snapshot = build_snapshot(alice, thread.id)["messages"]
        return {
            "open": [r.message_id for r in rows if r.status == Message.Status.OPEN],
            "tail": (rows[-1].message_id, rows[-1].role),
            "snapshot": {m["id"]: m["metadata"]["pai"]["status"] for m in snapshot},
        }

    async def prepare_run(input: Any) -> None:
        await input.thread.messages.append(
            role="system", parts=[{"type": "text", "text": "A visible note."}]
        )

    model = ProbeModel(ScriptedModel(steps=[ScriptedStep.reply("a streamed answer")]), probe)
    agent = define_agent(
        "mf-producer", instructions="x", model=model, lifecycle={"prepare_run": prepare_run}
    )
    assert asyncio.run(_execute(result.run.id, agent, checkpoint_seconds=0)).status == "completed"

    (seen,) = model.probed
    (open_id,) = seen["open"]
    assert seen["tail"] == (open_id, "assistant")
    assert seen["snapshot"][open_id] == "open"
    messages = build_snapshot(alice, thread.id)["messages"]
    assert [(m["role"], m["metadata"]["pai"]["producer"]) for m in messages] == [
        ("user", "send"),
        ("system", "lifecycle"),
        ("assistant", "model"),
    ]
    assert messages[-1]["id"] == open_id
    assert {m["metadata"]["pai"]["status"] for m in messages} == {"committed"}
    assert set(Message.Status.values) == {"open", "committed", "pending"}
    assert set(Message.Relation.values) == {"input", "context", "output"}
    for row in Message.objects.filter(thread=thread):
        assert row.status in Message.Status.values
        assert row.relation in Message.Relation.values


def test_mf_007_application_metadata_sits_beside_pai(alice: Identity) -> None:
    """MF-007: public application metadata is at the top level of ``metadata``, next to the
    reserved ``pai`` key, in the transcript and in the queue."""
    thread = _thread(alice)
    sent = _send(alice, thread.id, "one", metadata={"topic": "billing", "n": 1})
    queued = _send(alice, thread.id, "two", metadata={"topic": "later"})
    assert queued.queue_item is not None

    state = build_snapshot(alice, thread.id)
    (message,) = state["messages"]
    assert message["id"] == sent.message.message_id
    assert set(message["metadata"]) == {"topic", "n", "pai"}
    assert (message["metadata"]["topic"], message["metadata"]["n"]) == ("billing", 1)
    (item,) = state["queue"]["items"]
    assert item["messages"][0]["metadata"]["topic"] == "later"
    assert "pai" in item["messages"][0]["metadata"]


# --------------------------------------------------------------------------- native parts

_PM = {"acme": {"trace": "t1"}}
NATIVE_CHUNKS: list[dict[str, Any]] = [
    {"type": "start", "messageId": "m-native"},
    {"type": "start-step"},
    {"type": "reasoning-start", "id": "r1", "providerMetadata": _PM},
    {"type": "reasoning-delta", "id": "r1", "delta": "thinking"},
    {"type": "reasoning-end", "id": "r1"},
    {"type": "text-start", "id": "t1", "providerMetadata": _PM},
    {"type": "text-delta", "id": "t1", "delta": "Hello"},
    {"type": "text-end", "id": "t1"},
    {"type": "source-url", "sourceId": "s1", "url": "https://example.com", "title": "Ex"},
    {"type": "source-document", "sourceId": "s2", "mediaType": "text/plain", "title": "Doc"},
    {"type": "file", "url": "https://example.com/a.png", "mediaType": "image/png"},
    {"type": "custom", "kind": "acme.widget", "providerMetadata": _PM},
    {
        "type": "tool-input-available",
        "toolCallId": "c1",
        "toolName": "calculator",
        "input": {"expression": "1+1"},
        "toolMetadata": {"origin": "test"},
    },
    {"type": "tool-output-available", "toolCallId": "c1", "output": {"result": 2}},
    {
        "type": "tool-input-available",
        "toolCallId": "c2",
        "toolName": "web_search",
        "input": {"q": "pai"},
        "dynamic": True,
        "providerExecuted": True,
    },
    {"type": "tool-output-available", "toolCallId": "c2", "output": None},
    {"type": "data-report", "id": "d1", "data": {"done": True}},
    {"type": "finish-step"},
    {"type": "finish", "finishReason": "stop"},
]


def _commit(run_id: str, message: dict[str, Any]) -> None:
    """Commit ``message`` as the run's only step, through the ORM store's fenced write."""
    store = ORMThreadStore()
    claim = store.claim_run_sync(run_id, owner="w1", lease_seconds=60)
    commit_only_step(store, claim.lease, message)


def test_mf_009_stored_native_parts_round_trip_unchanged(alice: Identity) -> None:
    """MF-009: every standard part type is stored with its native type and fields and comes
    back unchanged from the database, the HTTP API and the snapshot."""
    thread = _thread(alice)
    run = _send(alice, thread.id, "hi").run
    message = dict(reduce_chunks(NATIVE_CHUNKS))
    _commit(run.id, message)

    row = Message.objects.get(thread=thread, message_id="m-native")
    assert row.parts == message["parts"]
    (stored,) = [m for m in build_snapshot(alice, thread.id)["messages"] if m["id"] == "m-native"]
    assert stored["parts"] == message["parts"]
    assert json.loads(json.dumps(stored["parts"])) == message["parts"]
    assert [p["type"] for p in row.parts] == [
        "step-start",
        "reasoning",
        "text",
        "source-url",
        "source-document",
        "file",
        "custom",
        "tool-calculator",
        "dynamic-tool",
        "data-report",
    ]


def test_mf_011_reserved_data_pai_parts_cannot_enter_through_a_send(alice: Identity) -> None:
    """MF-011: a ``data-pai-*`` part is reserved: a send carrying one is refused (nothing is
    stored), while application ``data-*`` parts pass."""
    thread = _thread(alice)
    for kind in ("data-pai-file", "data-pai-tool-data"):
        with pytest.raises(InvalidInput):
            services.send(
                alice,
                thread.id,
                {"parts": [{"type": "text", "text": "x"}, {"type": kind, "data": {}}]},
                dispatch=False,
            )
    assert not Message.objects.filter(thread=thread).exists()
    ok = services.send(
        alice,
        thread.id,
        {"parts": [{"type": "text", "text": "x"}, {"type": "data-note", "data": {"a": 1}}]},
        dispatch=False,
    )
    state = build_snapshot(alice, thread.id)
    assert state["messages"][0]["id"] == ok.message.message_id
    assert not any(p["type"].startswith("data-pai-") for m in state["messages"] for p in m["parts"])


class Amount(BaseModel):
    amount: int


@tool(input=Amount, needs_approval=True)
def transfer(args: Amount) -> dict[str, int]:
    """A person approves each call."""
    return {"sent": args.amount}


def test_mf_017_mf_018_tool_state_run_status_and_action_stay_separate(alice: Identity) -> None:
    """MF-017, MF-018: a waiting call's part keeps its native state; the run status and the
    pending action (bound to that message and tool call) are separate snapshot facts, never
    written into the part; cancelling the waiting run settles the part natively."""
    thread = _thread(alice)
    run = _send(alice, thread.id, "pay").run
    agent = define_agent(
        "mf-approval",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep.call("transfer", {"amount": 5}, id="c1")]),
        tools=[transfer],
    )
    assert asyncio.run(_execute(run.id, agent)).status == "waiting"

    state = build_snapshot(alice, thread.id)
    step = state["messages"][-1]
    (part,) = [p for p in step["parts"] if p["type"] == "tool-transfer"]
    assert part["state"] == "approval-requested"
    assert not {"runStatus", "action", "pendingAction", "status"} & set(part)
    assert state["runs"][-1]["status"] == "waiting"
    (action,) = state["pendingActions"]
    assert (action["messageId"], action["toolCallId"]) == (step["id"], "c1")
    assert action["approvalId"] == part["approval"]["id"]

    services.cancel_run(alice, run.id)
    state = build_snapshot(alice, thread.id)
    (part,) = [p for p in state["messages"][-1]["parts"] if p["type"] == "tool-transfer"]
    assert part["state"] == "output-error"
    assert part["toolMetadata"] == {"pai": {"source": "cancel"}}
    assert state["runs"][-1]["status"] == "cancelled"
    assert state["pendingActions"] == []
    assert PendingAction.objects.get(run=run).status == "cancelled"


# --------------------------------------------------------------------------- storage


def test_mf_029_storage_holds_folded_messages_never_a_chunk_log(alice: Identity) -> None:
    """MF-029: each stored assistant message is the fold of its published chunks, and no row
    of any table holds the chunks themselves."""
    thread = _thread(alice)
    result = _send(alice, thread.id, "What is 6 * 7?")
    sink = RecordingSink()
    assert asyncio.run(aexecute_run(result.run.id, sink=sink)).status == "completed"

    rows = list(Message.objects.filter(thread=thread, role="assistant"))
    assert len(rows) == 2
    for row in rows:
        chunks = sink.chunks(row.message_id)
        assert len(chunks) > len(row.parts)
        assert reduce_chunks(chunks)["parts"] == row.parts
    dumped = json.dumps(
        [
            list(model.objects.filter(thread=thread).values())
            for model in (Message, Run, QueueItem, PendingAction)
        ]
        + [list(Step.objects.filter(run__thread=thread).values())],
        default=str,
    )
    for chunk_type in ('"text-delta"', '"tool-input-delta"', '"start-step"', '"finish-step"'):
        assert chunk_type not in dumped


def test_mf_031_context_hidden_messages_never_reach_the_provider(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MF-031: the provider request is the conversion of the context-visible messages only;
    converting never rewrites the stored rows."""
    thread = _thread(alice)
    first = _send(alice, thread.id, "first question")
    asyncio.run(
        _execute(
            first.run.id,
            define_agent(
                "mf-ctx",
                instructions="x",
                model=ScriptedModel(steps=[ScriptedStep.reply("first answer")]),
            ),
        )
    )
    answer = Message.objects.get(thread=thread, role="assistant")
    Message.objects.filter(pk=answer.pk).update(in_context=False)
    stored = {r.message_id: r.parts for r in Message.objects.filter(thread=thread)}

    second = _send(alice, thread.id, "second question")
    model = ScriptedModel(steps=[ScriptedStep.reply("second answer")])
    asyncio.run(_execute(second.run.id, define_agent("mf-ctx", instructions="x", model=model)))

    (request,) = model.requests
    assert [m["role"] for m in request.messages] == ["user", "user"]
    texts = json.dumps(request.messages)
    assert "first question" in texts and "second question" in texts
    assert "first answer" not in texts
    for row in Message.objects.filter(thread=thread, message_id__in=list(stored)):
        assert row.parts == stored[row.message_id]


# --------------------------------------------------------------------------- queue


def test_mf_035_queued_input_is_in_the_queue_not_in_the_transcript(alice: Identity) -> None:
    """MF-035: before admission a queued send is absent from the snapshot's messages and is
    shown as ``queue.items[*].messages`` with the complete projected user-message shape."""
    thread = _thread(alice)
    active = _send(alice, thread.id, "one")
    queued = services.send(
        alice,
        thread.id,
        {"id": "q-1", "parts": [{"type": "text", "text": "two"}], "metadata": {"k": "v"}},
        dispatch=False,
    )
    assert queued.queue_item is not None

    state = build_snapshot(alice, thread.id)
    assert [m["id"] for m in state["messages"]] == [active.message.message_id]
    (item,) = state["queue"]["items"]
    (message,) = item["messages"]
    assert set(message) == {"id", "role", "metadata", "parts"}
    assert (message["id"], message["role"]) == ("q-1", "user")
    assert message["parts"] == [{"type": "text", "text": "two"}]
    assert message["metadata"]["k"] == "v"
    assert message["metadata"]["pai"]["producer"] == "send"


def test_mf_037_queued_input_creates_no_placeholder_message(alice: Identity) -> None:
    """MF-037: queued items (queue, steer and interrupt policies) add no message row, so no
    placeholder shows in the transcript before admission."""
    thread = _thread(alice)
    _send(alice, thread.id, "one")
    for policy, text in (("queue", "two"), ("steer", "three")):
        result = services.send(
            alice,
            thread.id,
            {"parts": [{"type": "text", "text": text}]},
            policy=policy,
            dispatch=False,
        )
        assert result.message is None and result.queue_item is not None
    assert Message.objects.filter(thread=thread).count() == 1
    assert QueueItem.objects.filter(thread=thread, status="queued").count() == 2
    assert [m["role"] for m in build_snapshot(alice, thread.id)["messages"]] == ["user"]


# --------------------------------------------------------------------------- envelope


def test_mf_041_mf_042_visibility_and_private_metadata_stay_in_the_envelope(
    alice: Identity, bob: Identity
) -> None:
    """MF-041, MF-042: visibility, scope and private metadata are envelope columns, never in
    the stored UIMessage; the snapshot holds only the caller's transcript-visible messages,
    without any envelope field."""
    thread = _thread(alice)
    run = _send(alice, thread.id, "hello").run

    async def prepare_run(input: Any) -> None:
        await input.thread.messages.append(
            role="system",
            parts=[{"type": "text", "text": "model-only note"}],
            visibility={"transcript": False},
        )
        await input.thread.messages.append(
            role="system",
            parts=[{"type": "text", "text": "shown note"}],
            visibility={"context": False},
            private_metadata={"reviewer": "secret-reviewer"},
        )

    agent = define_agent(
        "mf-envelope",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep.reply("ok")]),
        lifecycle={"prepare_run": prepare_run},
    )
    assert asyncio.run(_execute(run.id, agent)).status == "completed"

    hidden = Message.objects.get(thread=thread, parts__0__text="model-only note")
    shown = Message.objects.get(thread=thread, parts__0__text="shown note")
    assert (hidden.in_transcript, hidden.in_context) == (False, True)
    assert (shown.in_context, shown.private_metadata) == (False, {"reviewer": "secret-reviewer"})
    assert shown.scope_key == alice.scope_key
    for row in (hidden, shown):
        assert set(row.to_ui_message()) == {"id", "role", "metadata", "parts"}
        assert not any(word in json.dumps(row.parts) for word in ENVELOPE_WORDS)
        assert "reviewer" not in json.dumps(row.to_ui_message())

    state = build_snapshot(alice, thread.id)
    ids = [m["id"] for m in state["messages"]]
    assert hidden.message_id not in ids and shown.message_id in ids
    dumped = json.dumps(state["messages"])
    assert "secret-reviewer" not in dumped and "model-only note" not in dumped
    for message in state["messages"]:
        assert set(message) == {"id", "role", "metadata", "parts"}
        assert not {"visibility", "privateMetadata", "scopeKey"} & set(message["metadata"])
    with pytest.raises(NotFound):
        build_snapshot(bob, thread.id)


def test_mf_044_run_messages_name_an_existing_run_and_keep_transcript_order(
    alice: Identity,
) -> None:
    """MF-044: a message cannot name a run that does not exist, and the transcript lists
    messages in the order they were stored, run after run."""
    thread, first = _demo_run(alice)
    second = _send(alice, thread.id, "What is 2 + 3?").run
    assert asyncio.run(aexecute_run(second.id)).status == "completed"

    messages = build_snapshot(alice, thread.id)["messages"]
    assert [m["metadata"]["pai"]["runId"] for m in messages] == [first.id] * 3 + [second.id] * 3
    assert [m["role"] for m in messages] == ["user", "assistant", "assistant"] * 2
    rows = list(Message.objects.filter(thread=thread).order_by("id"))
    assert [r.message_id for r in rows] == [m["id"] for m in messages]
    assert all(Run.objects.filter(id=r.run_id).exists() for r in rows)

    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(
            message_id="orphan",
            thread=thread,
            scope_key=thread.scope_key,
            run_id="run_does_not_exist",
            role="assistant",
            parts=[],
            producer=Message.Producer.MODEL,
        )
    assert not Message.objects.filter(message_id="orphan").exists()


LEGACY_PARTS: Sequence[dict[str, Any]] = (
    {"type": "tool-invocation", "toolInvocation": {"toolName": "x", "state": "call"}},
    {"type": "tool-call", "toolCallId": "c", "toolName": "x", "args": {}},
    {"type": "pai-text", "text": "x"},
    {"type": "unknown-kind"},
)


@pytest.mark.parametrize("part", LEGACY_PARTS, ids=lambda p: p["type"])
def test_mf_045_the_send_boundary_rejects_unknown_and_legacy_part_types(
    alice: Identity, part: dict[str, Any]
) -> None:
    """MF-045: a send (HTTP, websocket and useChat all go through it) refuses part types
    outside the pinned grammar, the removed legacy tool-invocation shapes included."""
    thread = _thread(alice)
    with pytest.raises(InvalidInput):
        services.send(
            alice, thread.id, {"parts": [{"type": "text", "text": "x"}, part]}, dispatch=False
        )
    assert not Message.objects.filter(thread=thread).exists()


def test_mf_045_lifecycle_appends_reject_unknown_part_types(alice: Identity) -> None:
    """MF-045: the lifecycle append boundary refuses unknown and legacy part types too."""
    thread = _thread(alice)
    run = _send(alice, thread.id, "hi").run
    refused: list[str] = []

    async def prepare_run(input: Any) -> None:
        for part in LEGACY_PARTS:
            try:
                await input.thread.messages.append(role="assistant", parts=[part])
            except InvalidLifecycleWrite:
                refused.append(part["type"])

    agent = define_agent(
        "mf-append",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep.reply("ok")]),
        lifecycle={"prepare_run": prepare_run},
    )
    assert asyncio.run(_execute(run.id, agent)).status == "completed"
    assert refused == [p["type"] for p in LEGACY_PARTS]
    assert [m.role for m in Message.objects.filter(thread=thread)] == ["user", "assistant"]


class PublicMessageMeta(BaseModel):
    priority: int = 0
    tags: list[str] = []


class NoPrivate(BaseModel):
    pass


def test_mf_046_persisted_message_values_are_strict_json_fixed_points(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MF-046: schema-parsed message metadata is stored as its canonical parse (a fixed
    point of the schema); values that are not strict JSON are refused."""
    agent = define_agent(
        "mf-typed",
        instructions="x",
        model=ScriptedModel(),
        message_metadata=MetadataSchemas(private=NoPrivate, public=PublicMessageMeta),
    )
    _register(monkeypatch, agent)
    thread = _thread(alice, agent="mf-typed")
    sent = _send(alice, thread.id, "hi", metadata={"priority": "3"})

    stored = Message.objects.get(pk=sent.message.pk).metadata
    assert stored == {"priority": 3, "tags": []}
    assert PublicMessageMeta.model_validate(stored).model_dump(mode="json") == stored
    for bad in ({"priority": "high"}, {"tags": [float("nan")]}):
        with pytest.raises(InvalidInput):
            _send(alice, thread.id, "again", metadata=bad)
    with pytest.raises(InvalidInput):
        services.send(
            alice,
            thread.id,
            {"parts": [{"type": "data-x", "data": {"v": float("inf")}}]},
            dispatch=False,
        )
    assert Message.objects.filter(thread=thread).count() == 1


def test_mf_048_messages_is_the_only_transcript_collection(alice: Identity) -> None:
    """MF-048: the snapshot's ``messages`` (PaiMessages, as the HTTP transcript returns them)
    is the only transcript collection; no other key carries a message feed."""
    thread, _ = _demo_run(alice)
    state = build_snapshot(alice, thread.id)
    assert all(set(m) == {"id", "role", "metadata", "parts"} for m in state["messages"])
    assert [m.to_ui_message() for m in services.list_messages(alice, thread.id).items] == (
        state["messages"]
    )
    for key, value in state.items():
        if key == "messages":
            continue
        assert not (
            isinstance(value, list) and any(isinstance(v, dict) and "parts" in v for v in value)
        ), f"{key} looks like a second transcript"
