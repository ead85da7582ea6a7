"""Message invariants on the ORM store: the one open message (MF-043), per-step usage and
diagnostics in ``metadata.pai`` (MF-002, MF-004), producers (MF-005) and the persisted part
grammar at step commit (MF-045). The in-memory twins: tests/unit/engine/."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from pydantic import BaseModel

from pai_agents import RecordingSink, RunEngine, ScriptedModel, ScriptedStep, define_agent, tool
from pai_agents.engine.store import ClaimedRun, LeaseLost, OpenMessageConflict, StepRecord
from pai_agents.messages.parts import UnknownPartType
from pai_threads import services
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Step, Thread
from pai_threads.store.thread_store import ORMThreadStore
from pai_threads.websocket.snapshot import build_snapshot

pytestmark = pytest.mark.django_db(transaction=True)

LEGACY_PARTS: tuple[dict[str, Any], ...] = (
    {"type": "tool-invocation", "toolInvocation": {"toolName": "x", "state": "call"}},
    {"type": "tool-call", "toolCallId": "c", "toolName": "x", "args": {}},
    {"type": "pai-text", "text": "x"},
    {"type": "unknown-kind"},
)


class Q(BaseModel):
    q: str


@tool(input=Q)
def lookup(args: Q) -> dict[str, Any]:
    """Look something up."""
    return {"q": args.q}


def _register(monkeypatch: pytest.MonkeyPatch, agent: Any) -> None:
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)


def _claimed(identity: Identity) -> tuple[Thread, ClaimedRun]:
    thread = services.create_thread(identity)
    sent = services.send(
        identity, thread.id, {"parts": [{"type": "text", "text": "hi"}]}, dispatch=False
    )
    claim = ORMThreadStore().claim_run_sync(sent.run.id, owner="w", lease_seconds=30)
    return thread, claim


def _assistant(message_id: str, text: str = "x") -> Any:
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": text}]}


def _step(index: int) -> StepRecord:
    now = datetime.now(UTC)
    return StepRecord(
        index=index,
        message_id="",
        request={"provider": "p", "modelId": "m"},
        usage={"inputTokens": 1},
        finish_reason="stop",
        started_at=now,
        finished_at=now,
    )


def _row(thread: Thread, message_id: str, **fields: Any) -> Message:
    return Message.objects.create(
        message_id=message_id,
        thread=thread,
        scope_key=thread.scope_key,
        role=fields.pop("role", "assistant"),
        parts=[{"type": "text", "text": message_id}],
        producer=fields.pop("producer", Message.Producer.LIFECYCLE),
        **fields,
    )


# --------------------------------------------------------------------------- MF-043


def test_mf_043_the_database_refuses_a_second_open_message_in_a_thread(alice: Identity) -> None:
    """MF-043: a partial unique index keeps at most one open message per thread."""
    thread, _ = _claimed(alice)
    _row(thread, "open-1", status=Message.Status.OPEN)
    with pytest.raises(IntegrityError), transaction.atomic():
        _row(thread, "open-2", status=Message.Status.OPEN)
    other = services.create_thread(alice)
    _row(other, "open-elsewhere", status=Message.Status.OPEN)  # another thread: fine


def test_mf_043_opening_a_message_while_another_is_open_fails(alice: Identity) -> None:
    """MF-043: a checkpoint that would open a second message raises OpenMessageConflict and
    writes nothing."""
    thread, claim = _claimed(alice)
    _row(thread, "stale", status=Message.Status.OPEN)
    with pytest.raises(OpenMessageConflict):
        ORMThreadStore().checkpoint_message_sync(
            claim.lease, message=_assistant("a1"), step_index=0
        )
    assert not Message.objects.filter(message_id="a1").exists()


def test_mf_043_streaming_into_a_message_that_is_not_the_tail_fails(alice: Identity) -> None:
    """MF-043: the tail check is part of the checkpoint UPDATE: once a message follows the
    open one, streaming into it fails and its stored parts stay as they were."""
    thread, claim = _claimed(alice)
    store = ORMThreadStore()
    store.checkpoint_message_sync(claim.lease, message=_assistant("a1", "one"), step_index=0)
    store.checkpoint_message_sync(claim.lease, message=_assistant("a1", "two"), step_index=0)
    _row(thread, "note", role="system")
    with pytest.raises(OpenMessageConflict):
        store.checkpoint_message_sync(claim.lease, message=_assistant("a1", "three"), step_index=0)
    opened = Message.objects.get(message_id="a1")
    assert (opened.status, opened.parts) == ("open", [{"type": "text", "text": "two"}])


def test_a_repeated_checkpoint_is_fenced_by_the_lease(alice: Identity) -> None:
    """The prebuilt checkpoint statement (store/checkpoints.py) checks the lease in its own
    WHERE: a worker whose lease was taken over changes nothing and gets LeaseLost."""
    _, claim = _claimed(alice)
    store = ORMThreadStore()
    store.checkpoint_message_sync(claim.lease, message=_assistant("a1", "one"), step_index=0)
    store.checkpoint_message_sync(claim.lease, message=_assistant("a1", "two"), step_index=0)
    Run.objects.filter(id=claim.lease.run_id).update(lease_token=claim.lease.token + 1)
    with pytest.raises(LeaseLost):
        store.checkpoint_message_sync(claim.lease, message=_assistant("a1", "late"), step_index=0)
    assert Message.objects.get(message_id="a1").parts == [{"type": "text", "text": "two"}]


def test_mf_043_only_an_assistant_message_can_be_open(alice: Identity) -> None:
    """MF-043: opening a non-assistant message fails."""
    thread, claim = _claimed(alice)
    user = {"id": "u9", "role": "user", "parts": [{"type": "text", "text": "x"}]}
    with pytest.raises(OpenMessageConflict):
        ORMThreadStore().checkpoint_message_sync(claim.lease, message=user, step_index=0)
    assert list(Message.objects.filter(thread=thread).values_list("role", flat=True)) == ["user"]


def test_mf_043_a_streaming_run_keeps_its_open_message_at_the_tail(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MF-043: a run checkpointing at every part ends with no open message, after storing
    exactly one open message (its tail step) while it streamed."""
    seen: list[tuple[str, ...]] = []

    class Probe(RecordingSink):
        async def publish(self, event: Any) -> None:
            await super().publish(event)
            if event.get("type") == "generation.message.chunk":
                rows = await asyncio.to_thread(_open_and_tail, thread.id)
                seen.append(rows)

    model = ScriptedModel(steps=[ScriptedStep.reply("a longer streamed answer", chunk_size=2)])
    agent = define_agent("mf-open", instructions="x", model=model)
    _register(monkeypatch, agent)
    thread = services.create_thread(alice, agent="mf-open")
    sent = services.send(
        alice, thread.id, {"parts": [{"type": "text", "text": "hi"}]}, dispatch=False
    )

    async def run() -> None:
        store = ORMThreadStore()
        claim = await store.claim_run(sent.run.id, owner="w", lease_seconds=30)
        engine = RunEngine(agent=agent, store=store, sink=Probe(), checkpoint_seconds=0)
        assert (await engine.run_episode(claim)).status == "completed"

    async_to_sync(run)()
    opened = {s for s in seen if s[0]}
    assert opened and all(open_id == tail_id for open_id, tail_id in opened)
    assert not Message.objects.filter(thread=thread, status=Message.Status.OPEN).exists()


def _open_and_tail(thread_id: str) -> tuple[str, ...]:
    from django.db import connection

    try:
        opened = list(
            Message.objects.filter(thread_id=thread_id, status="open").values_list(
                "message_id", flat=True
            )
        )
        assert len(opened) <= 1
        tail = Message.objects.filter(thread_id=thread_id).order_by("-id").first()
        return (opened[0] if opened else "", tail.message_id if tail else "")
    finally:
        connection.close()


# --------------------------------------------------------------------------- MF-002 / MF-004


def test_mf_002_mf_004_each_step_message_carries_its_own_usage_and_diagnostics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MF-002, MF-004: a two-step run stores each step's own usage and diagnostics on its
    message, and the client projections (websocket snapshot, HTTP message page) show them
    under ``metadata.pai``; the run keeps the sum, the user message has neither."""
    model = ScriptedModel(
        steps=[
            ScriptedStep.call("lookup", {"q": "x"}, usage={"inputTokens": 10, "outputTokens": 2}),
            ScriptedStep.reply("done", usage={"inputTokens": 20, "outputTokens": 5}),
        ]
    )
    agent = define_agent("mf-usage", instructions="x", model=model, tools=[lookup])
    _register(monkeypatch, agent)
    user = User.objects.create_user("ursula")
    me = Identity(scope_key=f"user:{user.pk}", data={"userId": str(user.pk)})
    thread = services.create_thread(me, agent="mf-usage")
    sent = services.send(me, thread.id, {"parts": [{"type": "text", "text": "hi"}]}, dispatch=False)

    async def run() -> None:
        store = ORMThreadStore()
        claim = await store.claim_run(sent.run.id, owner="w", lease_seconds=30)
        engine = RunEngine(agent=agent, store=store, sink=RecordingSink())
        assert (await engine.run_episode(claim)).status == "completed"

    async_to_sync(run)()
    snapshot = build_snapshot(me, thread.id)["messages"]
    browser = Client()
    browser.force_login(user)
    response = browser.get(f"/api/pai/threads/{thread.id}/messages")
    assert response.status_code == 200, response.content
    assert response.json()["messages"] == snapshot

    first_user, first, second = snapshot
    assert not {"usage", "diagnostics"} & set(first_user["metadata"]["pai"])
    assert first["metadata"]["pai"]["usage"] == {"inputTokens": 10, "outputTokens": 2}
    assert second["metadata"]["pai"]["usage"] == {"inputTokens": 20, "outputTokens": 5}
    steps = {s.index: s for s in Step.objects.filter(run_id=sent.run.id)}
    for index, message in enumerate((first, second)):
        diagnostics = message["metadata"]["pai"]["diagnostics"]
        assert diagnostics["finishReason"] == steps[index].finish_reason
        assert diagnostics["modelId"] == steps[index].request["modelId"] == model.model_id
        assert diagnostics["provider"] == model.provider
        assert message["metadata"]["pai"]["usage"] == steps[index].usage
    assert [d["metadata"]["pai"]["diagnostics"]["finishReason"] for d in (first, second)] == [
        "tool-calls",
        "stop",
    ]
    assert Run.objects.get(id=sent.run.id).usage["inputTokens"] == 30


# --------------------------------------------------------------------------- MF-005


def test_mf_005_a_trigger_appends_no_input_message_and_admins_cannot_write_messages(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MF-005: ``trigger`` starts a run without an input message, so its run's only
    messages are ``model`` steps (``trigger`` is reserved for trigger input); the admin
    console is read-only for messages, so no ``admin`` message can be written there."""
    agent = define_agent(
        "mf-trigger", instructions="x", model=ScriptedModel(steps=[ScriptedStep.reply("tick")])
    )
    _register(monkeypatch, agent)
    thread = services.create_thread(alice, agent="mf-trigger")
    run = services.trigger(alice, thread.id, dispatch=False)

    async def execute() -> None:
        store = ORMThreadStore()
        claim = await store.claim_run(run.id, owner="w", lease_seconds=30)
        engine = RunEngine(agent=agent, store=store, sink=RecordingSink())
        assert (await engine.run_episode(claim)).status == "completed"

    async_to_sync(execute)()
    messages = build_snapshot(alice, thread.id)["messages"]
    assert [(m["role"], m["metadata"]["pai"]["producer"]) for m in messages] == [
        ("assistant", "model")
    ]
    assert {"send", "trigger", "model", "lifecycle", "admin"} == set(Message.Producer.values)

    User.objects.create_superuser("op", "op@example.com", "pw")
    operator = Client()
    operator.login(username="op", password="pw")
    row = Message.objects.get(thread=thread)
    assert operator.get("/admin/pai_threads/message/add/").status_code == 403
    change = reverse("admin:pai_threads_message_change", args=[quote(row.pk)])
    assert operator.post(change, {"role": "user"}).status_code == 403
    assert Message.objects.get(pk=row.pk).role == "assistant"


# --------------------------------------------------------------------------- MF-045


@pytest.mark.parametrize("part", LEGACY_PARTS, ids=lambda p: p["type"])
def test_mf_045_committing_a_step_rejects_unknown_part_types(
    alice: Identity, part: dict[str, Any]
) -> None:
    """MF-045: the ORM store refuses a step message whose parts leave the pinned AI SDK
    grammar (legacy tool-invocation / tool-call and PAI part names included): no message,
    no Step row, the run's step count unchanged; checkpoints refuse it too."""
    thread, claim = _claimed(alice)
    store = ORMThreadStore()
    message = {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "x"}, part]}
    with pytest.raises(UnknownPartType):
        store.commit_step_sync(claim.lease, message=message, step=_step(0), outcome=None)
    with pytest.raises(UnknownPartType):
        store.checkpoint_message_sync(claim.lease, message=message, step_index=0)
    assert list(Message.objects.filter(thread=thread).values_list("role", flat=True)) == ["user"]
    assert not Step.objects.filter(run_id=claim.lease.run_id).exists()
    assert Run.objects.get(id=claim.lease.run_id).step_count == 0
    # A valid step still commits under the same lease.
    store.commit_step_sync(claim.lease, message=_assistant("a1"), step=_step(0), outcome=None)
    assert Message.objects.get(message_id="a1").diagnostics == {
        "finishReason": "stop",
        "provider": "p",
        "modelId": "m",
    }
