"""Declared tool suspensions on the real database (docs/suspensions.md): a tool that asks a
person for an address, then a confirmation, each a durable ``input`` pending action answered
through the same submit path as approvals (HTTP, websocket, services), validated against the
declared model, accepted once, scoped to the caller; joined onto the tool part (MF-023).

The engine half is tests/unit/engine/test_tool_suspensions.py; the worker-restart
acceptance test is tests/integration/test_tool_suspensions_workers.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from pai_agents import define_agent
from pai_agents.lifecycle import AgentLifecycle
from pai_threads import services
from pai_threads.errors import ActionConflict, NotFound
from pai_threads.execution import registry
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Run, Thread
from pai_threads.realtime.buffers import get_buffer
from pai_threads.services import cancelling
from pai_threads.services.actions import AnswerInvalid
from pai_threads.websocket import commands
from tests.support.suspension_agents import collector, lines

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"
ADDRESS = {"street": "1 Rue de la Paix", "city": "Paris"}


def _no_dispatch(submit: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *args, **kwargs: submit(*args, **{**kwargs, "dispatch": False})


@pytest.fixture(autouse=True)
def _collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector agent is served here; answers do not dispatch (each test executes
    the resumed run itself, in this process)."""
    agents = {**registry.agents(), collector.name: collector}
    monkeypatch.setattr(registry, "agents", lambda: agents)
    monkeypatch.setattr(services, "submit_action", _no_dispatch(services.submit_action))


def _waiting(identity: Identity, path: Path) -> tuple[Thread, Run, PendingAction]:
    """A collector thread whose run waits on the address suspension."""
    thread = services.create_thread(identity, agent="collector")
    text = f"ship o-1 {path}"
    sent = services.send(
        identity, thread.id, {"parts": [{"type": "text", "text": text}]}, dispatch=False
    )
    assert sent.run is not None
    outcome = asyncio.run(aexecute_run(sent.run.id))
    assert outcome is not None and outcome.status == "waiting"
    return thread, sent.run, PendingAction.objects.get(run=sent.run, status="pending")


def _resume(run: Run) -> str:
    outcome = asyncio.run(aexecute_run(run.id))
    assert outcome is not None
    return outcome.status


def _ship_part(thread: Thread) -> dict[str, Any]:
    row = Message.objects.filter(thread=thread, role="assistant", step_index=0).get()
    [part] = [p for p in row.parts if p["type"] == "tool-ship"]
    return part


def _csrf(client: Client) -> dict[str, str]:
    client.get("/")
    token = client.cookies.get("csrftoken")
    return {"HTTP_X_CSRFTOKEN": token.value} if token else {}


def _post(client: Client, path: str, body: Any) -> Any:
    return client.post(
        f"{API}{path}", data=json.dumps(body), content_type="application/json", **_csrf(client)
    )


def _api_part(client: Client, thread_id: str) -> dict[str, Any]:
    page = client.get(f"{API}/threads/{thread_id}/messages").json()["messages"]
    return next(p for m in page for p in m["parts"] if p.get("type") == "tool-ship")


def test_two_episode_collection_completes_exactly_once(api_client: Client, tmp_path: Path) -> None:
    """MF-023, MF-024, LC-140: the address is asked and answered over HTTP, the confirmation
    over the websocket; each episode is a row of its own, joined onto the tool part in order;
    the tool ships once and the model sees the final output."""
    created = _post(api_client, "/threads", {"agent": "collector"})
    assert created.status_code == 201, created.content
    thread_id = created.json()["id"]
    identity = Identity(
        scope_key=f"session:{api_client.session.session_key}", data={"anonymous": True}
    )
    counter = tmp_path / "ship.log"
    sent = services.send(
        identity,
        thread_id,
        {"parts": [{"type": "text", "text": f"ship o-1 {counter}"}]},
        dispatch=False,
    )
    assert sent.run is not None
    assert _resume(sent.run) == "waiting"

    # The pending action: listed, with the suspension's name and the answer's schema.
    [listed] = api_client.get(f"{API}/actions").json()
    assert (listed["kind"], listed["suspension"], listed["toolName"]) == (
        "input",
        "address",
        "ship",
    )
    assert listed["input"] == {"prompt": "Where should o-1 go?"}
    assert listed["answerSchema"]["required"] == ["street", "city"]
    part = _api_part(api_client, thread_id)
    assert part["state"] == "input-available"  # a valid AI SDK part: no PAI state in it
    assert part["pendingSuspension"]["name"] == "address"
    assert part["pendingSuspension"]["id"] == listed["id"]

    answered = _post(api_client, f"/actions/{listed['id']}", {"answer": ADDRESS})
    assert answered.status_code == 200, answered.content
    assert Run.objects.get(pk=sent.run.id).status == Run.Status.QUEUED
    assert _resume(sent.run) == "waiting"

    confirm = PendingAction.objects.get(run_id=sent.run.id, status="pending")
    assert (confirm.kind, confirm.sequence, confirm.request["suspension"]) == (
        "input",
        1,
        "confirm",
    )
    assert confirm.input == {"to": "1 Rue de la Paix, Paris"}
    frame = {"type": "submit-action", "actionId": confirm.id, "value": {"answer": {"ok": True}}}
    reply = asyncio.run(commands.run_command(identity, thread_id, frame))
    assert reply["type"] == "ack", reply
    assert _resume(sent.run) == "completed"

    assert lines(counter) == ["enter", "enter", "enter", "shipped"]  # shipped exactly once
    part = _api_part(api_client, thread_id)
    assert part["state"] == "output-available"
    assert part["output"] == {"shipped": "o-1", "to": "Paris"}
    assert [(e["name"], e["status"]) for e in part["suspensions"]] == [
        ("address", "executing"),
        ("confirm", "executing"),
    ]
    assert [e["resolution"] for e in part["suspensions"]] == [
        {"answer": ADDRESS},
        {"answer": {"ok": True}},
    ]
    assert part["pendingSuspension"] is None
    final = Message.objects.filter(run_id=sent.run.id).order_by("-id").first()
    assert final is not None and "Paris" in json.dumps(final.parts)
    rows = PendingAction.objects.filter(run_id=sent.run.id).order_by("sequence")
    assert [r.submitted_by for r in rows] == [
        {"scopeKey": identity.scope_key, "anonymous": True},
        {"scopeKey": identity.scope_key, "anonymous": True},
    ]


def test_a_bad_answer_is_refused_with_a_typed_error_and_nothing_is_lost(
    api_client: Client, tmp_path: Path
) -> None:
    """A wrong answer gets 422 ``invalid_answer`` with the field errors; the action stays
    pending, the run waiting; the right answer afterwards is accepted."""
    created = _post(api_client, "/threads", {"agent": "collector"})
    thread_id = created.json()["id"]
    identity = Identity(
        scope_key=f"session:{api_client.session.session_key}", data={"anonymous": True}
    )
    sent = services.send(
        identity,
        thread_id,
        {"parts": [{"type": "text", "text": f"ship o-2 {tmp_path / 'log'}"}]},
        dispatch=False,
    )
    assert sent.run is not None and _resume(sent.run) == "waiting"
    action = PendingAction.objects.get(run_id=sent.run.id)

    bad = _post(api_client, f"/actions/{action.id}", {"answer": {"street": "", "town": "x"}})
    assert bad.status_code == 422, bad.content
    error = bad.json()["error"]
    assert error["code"] == "invalid_answer"
    assert {tuple(e["loc"]) for e in error["details"]["errors"]} == {("street",), ("city",)}
    wrong_shape = _post(api_client, f"/actions/{action.id}", {"output": ADDRESS})
    assert wrong_shape.status_code == 422 and wrong_shape.json()["error"]["code"] == (
        "invalid_input"
    )
    action.refresh_from_db()
    assert (action.status, action.response, action.submitted_by) == ("pending", None, None)
    assert Run.objects.get(pk=sent.run.id).status == Run.Status.WAITING
    assert _api_part(api_client, thread_id)["pendingSuspension"]["id"] == action.id

    with pytest.raises(AnswerInvalid):
        services.submit_action(identity, action.id, {"answer": "Paris"}, dispatch=False)
    ok = _post(api_client, f"/actions/{action.id}", {"answer": ADDRESS})
    assert ok.status_code == 200, ok.content


def test_a_second_answer_to_the_same_episode_is_refused(alice: Identity, tmp_path: Path) -> None:
    """Accepted once: the second answer gets ActionConflict (409) and the first stands."""
    _thread, _run, action = _waiting(alice, tmp_path / "log")
    services.submit_action(alice, action.id, {"answer": ADDRESS}, dispatch=False)
    with pytest.raises(ActionConflict):
        other = {"street": "2 Elm St", "city": "Oslo"}
        services.submit_action(alice, action.id, {"answer": other}, dispatch=False)
    action.refresh_from_db()
    assert action.response == {"answer": ADDRESS}


def test_another_tenant_cannot_answer(alice: Identity, bob: Identity, tmp_path: Path) -> None:
    """Scoped: bob cannot see or answer alice's suspension (NotFound, as if missing), over
    the service and the websocket frame."""
    thread, _run, action = _waiting(alice, tmp_path / "log")
    with pytest.raises(NotFound):
        services.submit_action(bob, action.id, {"answer": ADDRESS}, dispatch=False)
    frame = {"type": "submit-action", "actionId": action.id, "value": {"answer": ADDRESS}}
    reply = asyncio.run(commands.run_command(bob, thread.id, frame))
    assert reply["type"] == "error" and reply["code"] == "not_found", reply
    assert services.list_actions(bob) == []
    action.refresh_from_db()
    assert action.status == "pending" and action.submitted_by is None


def test_cancelling_a_run_waiting_on_an_input_suspension(alice: Identity, tmp_path: Path) -> None:
    """The pending episode is cancelled, the call settled with the cancellation error, and
    a late answer is refused; the tool never ships."""
    counter = tmp_path / "log"
    thread, run, action = _waiting(alice, counter)
    services.cancel_run(alice, run.id)
    run.refresh_from_db()
    action.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert action.status == PendingAction.Status.CANCELLED
    part = _ship_part(thread)
    assert part["state"] == "output-error"
    assert part["toolMetadata"]["pai"]["source"] == "cancel"
    with pytest.raises(ActionConflict):
        services.submit_action(alice, action.id, {"answer": ADDRESS}, dispatch=False)
    assert lines(counter) == ["enter"]


def test_get_pending_action_names_the_suspension_and_its_schema(
    alice: Identity, tmp_path: Path
) -> None:
    """MF-024: the sidecar of the (message, tool part) pair is the input episode, and its
    submit() answers it."""
    thread, run, action = _waiting(alice, tmp_path / "log")
    view = services.get_pending_action(alice, thread.id, action.message_id, action.tool_call_id)
    assert view is not None and view.kind == "input"
    assert view.suspension == "address" and view.answer_schema is not None
    assert set(view.answer_schema["properties"]) == {"street", "city"}
    view.submit({"answer": ADDRESS}, dispatch=False)
    assert Run.objects.get(pk=run.id).status == Run.Status.QUEUED


class _Recorder(AgentLifecycle):
    """Records what the tool hooks see (LC-132, LC-133, LC-140)."""

    def __init__(self) -> None:
        self.before: list[Any] = []
        self.after: list[Any] = []

    def before_tool_call(self, input: Any) -> Any:
        self.before.append(input)

    def after_tool_result(self, input: Any) -> Any:
        self.after.append(input)


def test_lc_133_lc_140_tool_hooks_on_the_orm(
    alice: Identity, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LC-132, LC-133: each resume enters before_tool_call with entry ``resume`` (the tool's
    name, the suspension answered, the stored answer, the action) and the episodes read
    from the database; LC-140: after_tool_result runs once, for the final output."""
    rec = _Recorder()
    hooked = define_agent(
        "collector_hooks",
        instructions="Suspension test agent with tool hooks.",
        model=collector.model,
        tools=list(collector.tools.values()),
        lifecycle=rec,
    )
    agents = {**registry.agents(), hooked.name: hooked}
    monkeypatch.setattr(registry, "agents", lambda: agents)
    thread = services.create_thread(alice, agent="collector_hooks")
    text = f"ship o-3 {tmp_path / 'log'}"
    sent = services.send(
        alice, thread.id, {"parts": [{"type": "text", "text": text}]}, dispatch=False
    )
    assert sent.run is not None
    assert _resume(sent.run) == "waiting"
    address = PendingAction.objects.get(run=sent.run, status="pending")
    services.submit_action(alice, address.id, {"answer": ADDRESS})
    assert _resume(sent.run) == "waiting"
    confirm = PendingAction.objects.get(run=sent.run, status="pending")
    services.submit_action(alice, confirm.id, {"answer": {"ok": False}})
    assert _resume(sent.run) == "completed"

    assert [b.entry.type for b in rec.before] == ["initial", "resume", "resume"]
    resumed = rec.before[1]
    assert (resumed.entry.name, resumed.entry.suspension) == ("ship", "address")
    assert resumed.entry.resume == ADDRESS
    assert resumed.entry.action == {
        "id": address.id,
        "kind": "input",
        "toolCallId": address.tool_call_id,
        "suspension": "address",
    }
    assert [(e.name, e.status) for e in resumed.suspend_history] == [("address", "submitted")]
    [after] = rec.after  # LC-140: not for the two suspensions
    assert after.result.status == "output-error" and after.result.source == "fail"
    assert after.entry.suspension == "confirm"
    assert [e.name for e in after.suspend_history] == ["address", "confirm"]


def test_lc_137_cancelling_with_a_tool_hook_settles_the_input_call_through_it(
    alice: Identity, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LC-137: with after_tool_result overridden, cancelling a run waiting on an input
    suspension settles the call in a short episode, through the hook, once, as a cancel."""
    rec = _Recorder()
    hooked = define_agent(
        "collector_cancel",
        instructions="Suspension test agent with tool hooks.",
        model=collector.model,
        tools=list(collector.tools.values()),
        lifecycle=rec,
    )
    agents = {**registry.agents(), hooked.name: hooked}
    monkeypatch.setattr(registry, "agents", lambda: agents)
    dispatched: list[str] = []
    monkeypatch.setattr(cancelling, "dispatch_after_commit", dispatched.append)
    counter = tmp_path / "log"
    thread = services.create_thread(alice, agent="collector_cancel")
    text = f"ship o-4 {counter}"
    sent = services.send(
        alice, thread.id, {"parts": [{"type": "text", "text": text}]}, dispatch=False
    )
    assert sent.run is not None and _resume(sent.run) == "waiting"

    assert services.cancel_run(alice, sent.run.id).status == "queued"
    assert dispatched == [sent.run.id]
    assert _resume(sent.run) == "cancelled"
    [after] = rec.after
    assert (after.result.source, after.result.status) == ("cancel", "output-error")
    part = _ship_part(thread)
    assert part["state"] == "output-error"
    assert PendingAction.objects.get(run=sent.run).status == PendingAction.Status.CANCELLED
    assert lines(counter) == ["enter"]


def test_mf_023_realtime_events_carry_each_input_episode(alice: Identity, tmp_path: Path) -> None:
    """MF-023 over the websocket: the suspending step's ``generation.finished`` carries the
    pending address episode; the re-suspending continuation's carries both episodes, the
    confirmation pending."""
    thread, run, action = _waiting(alice, tmp_path / "log")
    buffer = get_buffer()

    def last_finished_part() -> dict[str, Any]:
        state = asyncio.run(buffer.state(thread.id))
        events = asyncio.run(buffer.read(thread.id, after=0, upto=state.last_seq))
        finished = [e for e in events if e["type"] == "generation.finished"]
        parts = finished[-1]["message"]["parts"]
        return next(p for p in parts if p.get("toolCallId") == action.tool_call_id)

    part = last_finished_part()
    assert part["pendingSuspension"]["name"] == "address"
    assert part["pendingSuspension"]["answerSchema"]["required"] == ["street", "city"]
    services.submit_action(alice, action.id, {"answer": ADDRESS})
    assert _resume(run) == "waiting"
    part = last_finished_part()
    assert [e["name"] for e in part["suspensions"]] == ["address", "confirm"]
    assert part["pendingSuspension"]["name"] == "confirm"
    assert part["pendingSuspension"]["payload"] == {"to": "1 Rue de la Paix, Paris"}


def test_an_operator_answers_an_input_suspension_in_the_admin(
    alice: Identity, tmp_path: Path
) -> None:
    """The admin console answers through the same path: the form shows the schema, a bad
    answer is refused and changes nothing, a valid one is recorded as the operator's."""
    thread, run, action = _waiting(alice, tmp_path / "log")
    user = User.objects.create_user("op", "op@example.com", "pw", is_staff=True)
    codenames = ["view_thread", "view_run", "view_message", "view_pendingaction"]
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="pai_threads",
            codename__in=[*codenames, "change_pendingaction"],
        )
    )
    admin = Client()
    admin.login(username="op", password="pw")
    url = reverse("admin:pai_threads_thread_answer", args=[quote(thread.id), quote(action.id)])
    page = admin.get(url).content.decode()
    assert "Submit the answer" in page and "street" in page

    for garbage in ("not json{", json.dumps({"street": "x"})):
        refused = admin.post(url, {"answer": garbage, "fulfil": "1"}, follow=True)
        assert "Refused" in " | ".join(str(m) for m in refused.context["messages"])
    action.refresh_from_db()
    assert action.status == "pending"

    done = admin.post(url, {"answer": json.dumps(ADDRESS), "fulfil": "1"}, follow=True)
    assert "as an operator" in " | ".join(str(m) for m in done.context["messages"])
    action.refresh_from_db()
    assert action.response == {"answer": ADDRESS}
    assert action.submitted_by["manual"].startswith("operator:op#")
    # The dispatched resume asks for the confirmation next.
    deadline = time.monotonic() + 30
    while not PendingAction.objects.filter(run=run, status="pending", sequence=1).exists():
        assert time.monotonic() < deadline, "the resumed run did not ask for the confirm"
        time.sleep(0.05)
