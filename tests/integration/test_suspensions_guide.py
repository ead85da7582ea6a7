"""The example of docs/suspensions.md, executed from the page on Django: its ``ship`` tool is
served by an agent whose scripted model calls it, each suspension is answered through the
real submit path (HTTP and ``services.submit_action``), and the page's claims hold: the
``input`` pending action's payload, schema and wire shape, a bad answer refused with
``invalid_answer`` / :class:`AnswerInvalid` while nothing changes, accepted once, scoped,
the re-entry with the answers, one shipment, and the final result the model sees."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from pai_agents import ModelRequest, ScriptedModel, ScriptedStep, define_agent
from pai_agents.models.scripted import last_user_text
from pai_threads import services
from pai_threads.errors import ActionConflict, NotFound
from pai_threads.events.projections import message_public
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Run, Thread
from tests.support.subagent_dispatch import Dispatched, recording_executor

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "suspensions.md"
API = "/api/pai"
ADDRESS = {"street": "5 Quai", "city": "Nantes"}


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text("utf-8"), re.S)


def _example() -> dict[str, Any]:
    """The page's first Python block, as written, in a fresh namespace (its own list of
    shipments)."""
    namespace: dict[str, Any] = {"__name__": "suspensions_guide"}
    exec(compile(_blocks("python")[0], str(PAGE), "exec", dont_inherit=True), namespace)
    return namespace


def _matches(value: Any, shown: Any) -> bool:
    """``value`` is what the page shows, a ``...`` in a string standing for any text."""
    if isinstance(shown, str) and "..." in shown:
        pattern = ".*".join(re.escape(piece) for piece in shown.split("..."))
        return isinstance(value, str) and re.fullmatch(pattern, value) is not None
    if isinstance(shown, dict):
        return (
            isinstance(value, dict)
            and set(value) == set(shown)
            and all(_matches(value[k], shown[k]) for k in shown)
        )
    return bool(value == shown)


def _shipper(request: ModelRequest) -> ScriptedStep:
    """Calls ``ship`` for ``ship <order>``; after the result, says what it got."""
    last = request.messages[-1]
    if last["role"] == "tool":
        [output] = [p["output"] for p in last["content"] if p.get("type") == "tool-result"]
        return ScriptedStep(text=f"Result: {json.dumps(output['value'])}")
    order = last_user_text(request).split()[-1]
    return ScriptedStep.call("ship", {"order_id": order}, id=f"call_{order}")


@dataclass
class Guide:
    example: dict[str, Any]
    executor: Dispatched

    @property
    def shipments(self) -> list[str]:
        return list(self.example["shipments"])


@pytest.fixture
def guide(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[Guide]:
    """The page's tool served by a ``shipping`` agent; dispatches recorded, run on drain()."""
    example = _example()
    shipping = define_agent(
        "shipping",
        instructions="Ship orders; ask the person for what you need.",
        model=ScriptedModel(respond=_shipper, record_requests=False),
        tools=[example["ship"]],
    )
    settings.PAI = {**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], shipping]}
    registry.clear_cache()
    yield Guide(example=example, executor=recording_executor(monkeypatch))
    registry.clear_cache()


def _ship_part(thread_id: str) -> dict[str, Any]:
    rows = Message.objects.filter(thread_id=thread_id, role="assistant").order_by("created_at")
    parts = [p for row in rows for p in message_public(row)["parts"]]
    [part] = [p for p in parts if p.get("type") == "tool-ship"]
    return part


def _post(client: Client, path: str, body: Any) -> Any:
    return client.post(f"{API}{path}", data=body, content_type="application/json")


def test_the_guides_tool_asks_twice_over_http_and_ships_once(guide: Guide) -> None:
    """Steps 1 to 6 of "What happens", answered over HTTP: the action on the wire is the
    page's ``ActionOut``, a bad answer gets 422 ``invalid_answer`` and changes nothing, the
    valid one is accepted once, and the tool ships once with both answers."""
    client = Client()
    created = _post(client, "/threads", {"agent": "shipping"})
    assert created.status_code == 201, created.content
    thread_id = created.json()["id"]
    sent = _post(client, f"/threads/{thread_id}/messages", {"text": "ship o-1"})
    assert sent.status_code == 202, sent.content
    run_id = sent.json()["run"]["id"]
    guide.executor.drain()

    # 2. A pending action of kind input; the run waits with its lease released.
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.WAITING and run.lease_owner == ""
    row = PendingAction.objects.get(run=run)
    assert (row.kind, row.sequence, row.tool_call_id) == ("input", 0, "call_o-1")
    assert row.input == {"prompt": "Where should o-1 go?"}
    schema = guide.example["Address"].model_json_schema()
    assert row.request == {"suspension": "address", "schema": schema}
    # 3. Listed as the page's "On the wire" block shows it.
    [listed] = client.get(f"{API}/actions").json()
    [wire] = [json.loads(block) for block in _blocks("json")[:1]]
    assert _matches(listed, wire), json.dumps(listed, indent=2)
    assert (listed["id"], listed["runId"], listed["messageId"]) == (row.id, run_id, row.message_id)
    part = _ship_part(thread_id)
    assert part["state"] == "input-available"
    assert part["pendingSuspension"]["id"] == row.id
    assert part["pendingSuspension"]["name"] == "address"
    assert [e["name"] for e in part["suspensions"]] == ["address"]

    # 4. A bad answer: 422 invalid_answer listing each field; the action stays pending.
    bad = _post(client, f"/actions/{row.id}", {"answer": {"street": "5 Quai"}})
    assert bad.status_code == 422, bad.content
    error = bad.json()["error"]
    assert error["code"] == "invalid_answer"
    assert [e["loc"] for e in error["details"]["errors"]] == [["city"]]
    row.refresh_from_db()
    assert (row.status, row.response) == ("pending", None)
    assert Run.objects.get(pk=run_id).status == Run.Status.WAITING
    # A valid answer: accepted once, stored normalized, the run queued again.
    answered = _post(client, f"/actions/{row.id}", {"answer": ADDRESS})
    assert answered.status_code == 200, answered.content
    again = _post(client, f"/actions/{row.id}", {"answer": ADDRESS})
    assert again.status_code == 409 and again.json()["error"]["code"] == "action_conflict"
    row.refresh_from_db()
    assert row.response == {"answer": ADDRESS}
    assert row.submitted_by is not None and row.submitted_by["anonymous"] is True
    assert Run.objects.get(pk=run_id).status == Run.Status.QUEUED

    # 5, 6. Re-entered from the top with the address; it suspends again for confirm.
    guide.executor.drain()
    confirm = PendingAction.objects.get(run_id=run_id, status="pending")
    assert (confirm.sequence, confirm.request["suspension"]) == (1, "confirm")
    assert confirm.input == {"address": ADDRESS}
    assert guide.shipments == []
    assert _post(client, f"/actions/{confirm.id}", {"answer": {"ok": True}}).status_code == 200
    guide.executor.drain()

    assert Run.objects.get(pk=run_id).status == Run.Status.COMPLETED
    assert guide.shipments == ["o-1"]  # after the last suspend: once
    part = _ship_part(thread_id)
    assert part["state"] == "output-available"
    assert part["output"] == {"shipped": "o-1", "to": "5 Quai, Nantes"}
    assert [e["name"] for e in part["suspensions"]] == ["address", "confirm"]
    assert part["pendingSuspension"] is None
    final = Message.objects.filter(thread_id=thread_id, role="assistant").order_by("-created_at")
    assert message_public(final[0])["parts"][-1]["text"] == (
        'Result: {"shipped": "o-1", "to": "5 Quai, Nantes"}'
    )


def _waiting(identity: Identity, guide: Guide, order: str) -> tuple[Thread, PendingAction]:
    thread = services.create_thread(identity, agent="shipping")
    services.send(identity, thread.id, {"parts": [{"type": "text", "text": f"ship {order}"}]})
    guide.executor.drain()
    return thread, PendingAction.objects.get(thread=thread, status="pending")


def test_answers_through_submit_action_are_typed_and_scoped(
    guide: Guide, alice: Identity, bob: Identity
) -> None:
    """``services.submit_action``: a bad answer raises AnswerInvalid, another tenant gets
    NotFound, a second answer ActionConflict; ``ok: False`` ends the call with the tool's
    failure and nothing ships."""
    thread, address = _waiting(alice, guide, "o-2")
    with pytest.raises(services.AnswerInvalid) as refused:
        services.submit_action(alice, address.id, {"answer": {"city": "Nantes"}})
    assert refused.value.code == "invalid_answer"
    with pytest.raises(NotFound):
        services.submit_action(bob, address.id, {"answer": ADDRESS})
    assert services.list_actions(bob) == []
    services.submit_action(alice, address.id, {"answer": ADDRESS})
    with pytest.raises(ActionConflict):
        services.submit_action(alice, address.id, {"answer": ADDRESS})
    guide.executor.drain()

    confirm = PendingAction.objects.get(thread=thread, status="pending")
    services.submit_action(alice, confirm.id, {"answer": {"ok": False}})
    guide.executor.drain()
    assert Run.objects.get(pk=confirm.run_id).status == Run.Status.COMPLETED
    part = _ship_part(thread.id)
    assert part["state"] == "output-error"
    assert part["errorText"] == "The person cancelled the shipment."
    assert guide.shipments == []
