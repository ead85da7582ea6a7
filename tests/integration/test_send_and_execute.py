"""A send to the demo agent, executed for real on the ORM store (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from pai_agents import RecordingSink, RunEngine
from pai_agents.engine.store import LeaseLost
from pai_threads import services
from pai_threads.errors import InvalidInput, NotFound, ThreadBusy
from pai_threads.execution.execute import aexecute_run
from pai_threads.execution.registry import get_agent
from pai_threads.identity import Identity
from pai_threads.models import Message, QueueItem, Run, Step
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)


def _ask(identity: Identity, text: str) -> services.SendResult:
    thread = services.create_thread(identity)
    return services.send(
        identity,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": text}]},
        dispatch=False,
    )


def assert_calculator_transcript(run: Run, expression_result: str) -> None:
    """The acceptance shape: user message, step-1 tool message, step-2 answer, Step rows."""
    messages = list(Message.objects.filter(thread_id=run.thread_id).order_by("id"))
    assert [m.role for m in messages] == ["user", "assistant", "assistant"]
    user, step1, step2 = messages
    assert user.run_id == run.id and user.producer == "send"
    tool_part = next(p for p in step1.parts if p["type"] == "tool-calculator")
    assert tool_part["state"] == "output-available"
    assert tool_part["output"]["result"] == int(expression_result)
    assert step1.step_index == 0 and step2.step_index == 1
    text = "".join(p["text"] for p in step2.parts if p["type"] == "text")
    assert expression_result in text
    assert run.status == "completed"
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert [s.index for s in steps] == [0, 1]
    assert [s.message_id for s in steps] == [step1.id, step2.id]
    for step in steps:
        assert step.usage["inputTokens"] > 0 and step.usage["outputTokens"] > 0
    assert steps[0].finish_reason == "tool-calls" and steps[1].finish_reason == "stop"


def test_send_to_demo_agent_stores_the_full_tool_round_trip(alice: Identity) -> None:
    """MF-001: the tool step and the answer step are two assistant messages."""
    result = _ask(alice, "What is 6 * 7?")
    outcome = asyncio.run(aexecute_run(result.run.id))

    assert outcome is not None and outcome.status == "completed"
    run = Run.objects.get(id=result.run.id)
    assert_calculator_transcript(run, "42")
    assert run.step_count == 2 and run.attempt == 1 and run.lease_owner == ""


def test_streamed_chunks_rebuild_the_stored_messages(alice: Identity) -> None:
    from pai_agents.messages.reducer import reduce_chunks

    result = _ask(alice, "12 * (3 + 4)")
    sink = RecordingSink()
    asyncio.run(aexecute_run(result.run.id, sink=sink))

    for row in Message.objects.filter(run_id=result.run.id, role="assistant"):
        rebuilt = reduce_chunks(sink.chunks(row.message_id))
        assert rebuilt == {"id": row.message_id, "role": "assistant", "parts": row.parts}


def test_sends_are_idempotent_on_the_message_id(alice: Identity) -> None:
    thread = services.create_thread(alice)
    message = {"id": "client-1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    first = services.send(alice, thread.id, message, dispatch=False)
    again = services.send(alice, thread.id, message, dispatch=False)

    assert again.created is False
    assert (again.message.pk, again.run.pk) == (first.message.pk, first.run.pk)
    assert Message.objects.filter(thread=thread).count() == 1
    assert Run.objects.filter(thread=thread).count() == 1


def test_reject_policy_refuses_a_send_during_an_active_run_and_stores_nothing(
    alice: Identity,
) -> None:
    thread = services.create_thread(alice)
    services.send(alice, thread.id, {"parts": [{"type": "text", "text": "one"}]}, dispatch=False)
    with pytest.raises(ThreadBusy):
        services.send(
            alice,
            thread.id,
            {"parts": [{"type": "text", "text": "two"}]},
            policy="reject",
            dispatch=False,
        )
    assert Message.objects.filter(thread=thread).count() == 1
    assert not QueueItem.objects.filter(thread=thread).exists()


def test_queue_policy_holds_input_outside_the_transcript_until_the_run_ends(
    alice: Identity, wait_for_run: Callable[..., Run]
) -> None:
    """MF-036, MF-037: queued input is not in the transcript; admission moves the same
    message (same id, parts unconverted) into it."""
    thread = services.create_thread(alice)
    first = services.send(
        alice, thread.id, {"parts": [{"type": "text", "text": "one"}]}, dispatch=False
    )
    two = {"id": "q2", "parts": [{"type": "text", "text": "two"}]}
    queued = services.send(alice, thread.id, two, dispatch=False)
    assert queued.message is None and queued.queue_item is not None
    assert queued.run is not None and queued.run.pk == first.run.pk
    transcript = [m.message_id for m in services.list_messages(alice, thread.id).items]
    assert transcript == [first.message.message_id]
    again = services.send(alice, thread.id, two, dispatch=False)
    assert again.created is False and again.queue_item.pk == queued.queue_item.pk

    asyncio.run(aexecute_run(first.run.id))
    admitted = Message.objects.get(thread=thread, message_id="q2")
    assert admitted.parts == [{"type": "text", "text": "two"}]
    assert admitted.run_id != first.run.id
    assert QueueItem.objects.get(pk=queued.queue_item.pk).status == "admitted"
    # Admission dispatched the new run to the executor: let it finish before teardown.
    assert wait_for_run(admitted.run_id).status == "completed"


def test_another_identity_cannot_see_or_send_to_the_thread(alice: Identity, bob: Identity) -> None:
    result = _ask(alice, "hello")
    with pytest.raises(NotFound):
        services.get_thread(bob, result.message.thread_id)
    with pytest.raises(NotFound):
        services.list_messages(bob, result.message.thread_id)
    with pytest.raises(NotFound):
        services.send(bob, result.message.thread_id, {"parts": [{"type": "text", "text": "x"}]})
    with pytest.raises(NotFound):
        services.get_run(bob, result.run.id)
    assert services.list_threads(bob).items == []


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "parts": [{"type": "text", "text": "x"}]},
        {"parts": []},
        {"parts": [{"type": "tool-x", "state": "input-available"}]},
        {"parts": [{"type": "text"}]},
        {"parts": [{"type": "text", "text": "x"}], "metadata": {"pai": {"status": "committed"}}},
        {"parts": [{"type": "text", "text": "x", "extra": float("nan")}]},
    ],
    ids=[
        "assistant-role",
        "no-parts",
        "tool-part",
        "text-without-text",
        "reserved-metadata",
        "nan",
    ],
)
def test_malformed_messages_are_rejected_with_a_typed_error(alice: Identity, message: dict) -> None:
    """MF-008 (``metadata.pai`` is reserved), MF-046 (NaN is not strict JSON): malformed input
    is refused with InvalidInput and stores nothing."""
    thread = services.create_thread(alice)
    with pytest.raises(InvalidInput):
        services.send(alice, thread.id, message, dispatch=False)
    assert not Message.objects.filter(thread=thread).exists()
    assert not Run.objects.filter(thread=thread).exists()


def test_orm_store_fences_writes_of_a_lost_lease(alice: Identity) -> None:
    result = _ask(alice, "hello")
    store = ORMThreadStore()
    stale = store.claim_run_sync(result.run.id, owner="w1", lease_seconds=-1)
    fresh = store.claim_run_sync(result.run.id, owner="w2", lease_seconds=60)
    assert fresh.lease.token == stale.lease.token + 1

    with pytest.raises(LeaseLost):
        store.heartbeat_sync(stale.lease, lease_seconds=60)
    engine = RunEngine(agent=get_agent("assistant"), store=store)
    with pytest.raises(LeaseLost):
        asyncio.run(engine.run_episode(stale))
    assert list(Message.objects.filter(run_id=result.run.id).values_list("role", flat=True)) == [
        "user"
    ]
    run = Run.objects.get(id=result.run.id)
    assert run.lease_owner == "w2" and run.lease_token == fresh.lease.token


def test_message_pages_walk_back_through_the_transcript(alice: Identity) -> None:
    thread = services.create_thread(alice)
    for index in range(7):
        row = services.send(
            alice, thread.id, {"parts": [{"type": "text", "text": f"m{index}"}]}, dispatch=False
        )
        Run.objects.filter(id=row.run.id).update(status="completed")

    seen: list[str] = []
    token = None
    while True:
        page = services.list_messages(alice, thread.id, limit=3, page_token=token)
        seen = [m.parts[0]["text"] for m in page.items] + seen
        token = page.next_page_token
        if token is None:
            break
    assert seen == [f"m{i}" for i in range(7)]
    with pytest.raises(InvalidInput):
        services.list_messages(alice, thread.id, page_token="forged")


def test_a_step_sees_only_the_newest_context_window(alice: Identity, settings) -> None:
    """Cost stays flat as threads grow: load_context reads a bounded, ordered window."""
    settings.PAI = {**settings.PAI, "CONTEXT_WINDOW_MESSAGES": 3}
    thread = services.create_thread(alice)
    for index in range(3):
        sent = services.send(
            alice, thread.id, {"parts": [{"type": "text", "text": f"m{index}"}]}, dispatch=False
        )
        Run.objects.filter(id=sent.run.id).update(status="completed")
    sent = services.send(
        alice, thread.id, {"parts": [{"type": "text", "text": "last"}]}, dispatch=False
    )
    claim = ORMThreadStore().claim_run_sync(sent.run.id, owner="w", lease_seconds=30)
    context = ORMThreadStore().load_context_sync(claim.lease)
    assert [m["parts"][0]["text"] for m in context] == ["m1", "m2", "last"]
