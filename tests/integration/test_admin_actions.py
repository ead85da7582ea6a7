"""Operator actions in the console go through the runtime, never row edits (issue 12, point 3).

Each action is posted with Django's test client as a staff user would; the agent's lifecycle
hooks record that the runtime ran (after_tool_result, run_finished, history_rewritten), the
replay buffer that websocket clients read holds the events, and the admin's history logs it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission, User
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from pai_agents import ScriptedModel, ScriptedStep, define_agent
from pai_agents.engine.rewrites import dispatcher
from pai_agents.models.scripted import ScriptedToolCall
from pai_threads import services
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Run, Thread
from pai_threads.realtime.buffers import get_buffer
from pai_threads.routing import websocket_urlpatterns
from tests.support.agents import ask_user, transfer

pytestmark = pytest.mark.django_db(transaction=True)

OWNER = Identity(scope_key="user:olga", data={"userId": "olga"})


def _respond(request: Any) -> ScriptedStep:
    last = request.messages[-1]
    if last["role"] == "tool":
        return ScriptedStep(text="Done.")
    text = " ".join(str(p.get("text", "")) for p in last.get("content", []) if isinstance(p, dict))
    text = text or str(last.get("content", ""))
    if "approval" in text:
        return ScriptedStep(
            text="Needs approval.",
            tool_calls=[ScriptedToolCall(name="transfer", input={"amount": 7})],
        )
    if "ask" in text:
        return ScriptedStep(
            text="A question.",
            tool_calls=[ScriptedToolCall(name="ask_user", input={"question": "Which?"})],
        )
    return ScriptedStep(text="Hello.")


class Hooks:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def after_tool_result(self, input: Any) -> None:
        self.calls.append(("after_tool_result", input.result.source))

    def run_finished(self, input: Any) -> None:
        self.calls.append(("run_finished", input.run_id))

    def history_rewritten(self, input: Any) -> None:
        self.calls.append(("history_rewritten", input.rewrite.kind))

    def saw(self, call: tuple[str, Any], timeout: float = 30.0) -> bool:
        """Whether ``call`` was recorded, waiting for it: run_finished runs after the run's
        end is written, on the executor's or the post-commit dispatcher's thread."""
        deadline = time.monotonic() + timeout
        while call not in self.calls and time.monotonic() < deadline:
            dispatcher().wait_idle()
            time.sleep(0.02)
        return call in self.calls


@pytest.fixture
def hooks() -> Iterator[Hooks]:
    recorder = Hooks()
    agent = define_agent(
        "operated",
        instructions="x",
        model=ScriptedModel(respond=_respond, record_requests=False),
        tools=[transfer, ask_user],
        lifecycle={
            "after_tool_result": recorder.after_tool_result,
            "run_finished": recorder.run_finished,
            "history_rewritten": recorder.history_rewritten,
        },
    )
    with override_settings(PAI={**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], agent]}):
        yield recorder


def _staff(name: str, *codenames: str) -> Client:
    user = User.objects.create_user(name, f"{name}@example.com", "pw", is_staff=True)
    views = [f"view_{m}" for m in ("thread", "run", "message", "pendingaction")]
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="pai_threads", codename__in=[*views, *codenames]
        )
    )
    client = Client()
    client.login(username=name, password="pw")
    return client


@pytest.fixture
def operator() -> Client:
    return _staff(
        "op",
        "change_thread",
        "delete_thread",
        "change_run",
        "change_message",
        "change_pendingaction",
    )


def _waiting(text: str) -> Run:
    thread = services.create_thread(OWNER, agent="operated")
    sent = services.send(
        OWNER, thread.id, {"parts": [{"type": "text", "text": text}]}, dispatch=False
    )
    assert asyncio.run(aexecute_run(sent.run.id)).status in ("waiting", "completed")
    return Run.objects.get(id=sent.run.id)


def _url(name: str, *args: object) -> str:
    return reverse(f"admin:pai_threads_{name}", args=[quote(a) for a in args])


def _answer_url(run: Run) -> tuple[PendingAction, str]:
    action = PendingAction.objects.get(run=run)
    return action, _url("thread_answer", run.thread_id, action.id)


def _said(response: Any) -> str:
    return " | ".join(str(m) for m in response.context["messages"])


def _live(thread_id: str) -> list[str]:
    """The event types in the thread's replay buffer: what websocket clients receive."""
    buffer = get_buffer()
    state = async_to_sync(buffer.state)(thread_id)
    events = async_to_sync(buffer.read)(thread_id, after=0, upto=state.last_seq)
    return [e["type"] for e in events]


def _logged(obj: Any) -> list[str]:
    return [e.get_change_message() for e in LogEntry.objects.filter(object_id=str(obj.pk))]


def test_an_operator_approves_a_pending_action_and_the_run_resumes(
    operator: Client, hooks: Hooks, wait_for_run: Callable[..., Run]
) -> None:
    run = _waiting("needs approval")
    action, url = _answer_url(run)
    assert "Approve" in operator.get(url).content.decode()

    response = operator.post(url, {"approved": "true", "reason": "ok by ops"}, follow=True)
    assert "as an operator" in _said(response)
    action.refresh_from_db()
    assert action.status in ("submitted", "executing")  # the resumed run may have taken it
    assert action.submitted_by["manual"].startswith("operator:op#")
    assert wait_for_run(run.id).status == "completed"
    assert ("after_tool_result", "resume") in hooks.calls and hooks.saw(("run_finished", run.id))
    assert "message.committed" in _live(run.thread_id) and "run.status" in _live(run.thread_id)
    assert any("as an operator" in m for m in _logged(Thread.objects.get(id=run.thread_id)))

    again = operator.post(url, {"approved": "false"}, follow=True)
    assert again.status_code == 200 and "already" in _said(again)


def test_an_operator_fulfils_a_client_tool_validated_like_the_api(
    operator: Client, hooks: Hooks, wait_for_run: Callable[..., Run]
) -> None:
    run = _waiting("ask me")
    action, url = _answer_url(run)
    for garbage in ({"output": "not json{"}, {"output": ""}, {"approved": "maybe"}):
        response = operator.post(url, garbage, follow=True)
        assert response.status_code == 200 and "Refused" in _said(response)
    assert PendingAction.objects.get(id=action.id).status == "pending"

    response = operator.post(url, {"output": '"the blue one"'}, follow=True)
    assert "as an operator" in _said(response)
    assert wait_for_run(run.id).status == "completed"
    assert ("after_tool_result", "manual") in hooks.calls


def test_an_action_of_another_thread_or_an_ended_run_is_refused(
    operator: Client, hooks: Hooks
) -> None:
    first, second = _waiting("approval one"), _waiting("approval two")
    theirs = PendingAction.objects.get(run=second)
    response = operator.post(
        _url("thread_answer", first.thread_id, theirs.id), {"approved": "true"}, follow=True
    )
    assert "no pending action" in _said(response)
    response = operator.get(_url("thread_answer", first.thread_id, "garbage id!"), follow=True)
    assert response.status_code == 200 and "no pending action" in _said(response)

    # The run ended under the action: nothing waits for an answer.
    mine = PendingAction.objects.get(run=first)
    Run.objects.filter(id=first.id).update(status=Run.Status.FAILED)
    response = operator.post(
        _url("thread_answer", first.thread_id, mine.id), {"approved": "true"}, follow=True
    )
    assert "run has ended" in _said(response)
    assert PendingAction.objects.get(id=mine.id).status == "pending"
    assert PendingAction.objects.get(id=theirs.id).status == "pending"


def test_hiding_a_message_from_the_context_is_the_visibility_rewrite(
    operator: Client, hooks: Hooks
) -> None:
    run = _waiting("hello")
    message = Message.objects.filter(run=run, role="assistant").get()
    response = operator.post(
        "/admin/pai_threads/message/",
        {"action": "hide_from_context", "_selected_action": [message.pk]},
        follow=True,
    )
    assert "hidden from the context" in _said(response)
    message.refresh_from_db()
    assert (message.in_transcript, message.in_context) == (True, False)
    assert hooks.saw(("history_rewritten", "visibility"))
    assert "thread.updated" in _live(run.thread_id)
    assert any("visibility rewrite" in m for m in _logged(message))

    # While a run holds the lease the rewrite is refused (LC-050): a message, no change.
    Run.objects.filter(id=run.id).update(status=Run.Status.RUNNING)
    response = operator.post(
        "/admin/pai_threads/message/",
        {"action": "show_in_context", "_selected_action": [message.pk]},
        follow=True,
    )
    assert "refused" in _said(response)
    assert Message.objects.get(pk=message.pk).in_context is False


def test_rename_archive_trigger_and_delete_a_thread(
    operator: Client, hooks: Hooks, wait_for_run: Callable[..., Run]
) -> None:
    run = _waiting("hello")
    thread = Thread.objects.get(id=run.thread_id)
    operator.post(_url("thread_rename", thread.id), {"title": "  Ops   title "})
    operator.post(_url("thread_archive", thread.id), {"confirm": "1"})
    thread.refresh_from_db()
    assert (thread.title, thread.title_source, thread.archived) == ("Ops title", "manual", True)
    assert operator.post(_url("thread_rename", thread.id), {"title": "x" * 500}).status_code == 200

    response = operator.post(_url("thread_trigger", thread.id), {"confirm": "1"}, follow=True)
    assert "initiator trigger" in _said(response)
    triggered = Run.objects.get(thread=thread, initiator="trigger")
    assert wait_for_run(triggered.id).status == "completed"
    assert len(_logged(thread)) == 3

    waiting = _waiting("approval please")
    doomed = Thread.objects.get(id=waiting.thread_id)
    page = operator.get(_url("thread_remove", doomed.id)).content.decode()
    assert waiting.id in page and "cancelled first" in page
    response = operator.post(_url("thread_remove", doomed.id), {"confirm": "1"}, follow=True)
    if Thread.objects.filter(id=doomed.id).exists():  # the cancel settles in an episode
        assert "still stopping" in _said(response)
        assert wait_for_run(waiting.id).status == "cancelled"
        response = operator.post(_url("thread_remove", doomed.id), {"confirm": "1"}, follow=True)
    assert "Deleted thread" in _said(response)
    assert not Thread.objects.filter(id=doomed.id).exists()
    assert hooks.saw(("run_finished", waiting.id))  # cancelled first (TH-041)
    assert "thread.deleted" in _live(doomed.id)
    assert LogEntry.objects.filter(object_id=doomed.id, action_flag=DELETION).exists()


def test_cancel_and_recover_runs_through_the_runtime(
    operator: Client, hooks: Hooks, wait_for_run: Callable[..., Run]
) -> None:
    run = _waiting("approval")
    response = operator.post(_url("run_recover", run.id), {"confirm": "1"}, follow=True)
    assert "waits for its pending actions" in _said(response)
    response = operator.post(_url("run_cancel", run.id), {"confirm": "1"}, follow=True)
    assert "cancel" in _said(response).lower()
    assert wait_for_run(run.id).status == "cancelled"
    assert PendingAction.objects.get(run=run).status == "cancelled"
    assert hooks.saw(("run_finished", run.id))
    response = operator.post(
        "/admin/pai_threads/run/",
        {"action": "cancel_runs", "_selected_action": [run.id]},
        follow=True,
    )
    assert "run has ended" in _said(response)
    assert len(_logged(run)) == 1


def test_recover_re_dispatches_a_run_whose_lease_expired(
    operator: Client, hooks: Hooks, wait_for_run: Callable[..., Run]
) -> None:
    """A run left running by a dead worker (lease expired) is re-dispatched as the sweeper
    does, and completes; one whose lease is live is refused."""
    thread = services.create_thread(OWNER, agent="operated")
    sent = services.send(
        OWNER, thread.id, {"parts": [{"type": "text", "text": "hi"}]}, dispatch=False
    )
    live = timezone.now() + timedelta(minutes=5)
    Run.objects.filter(id=sent.run.id).update(
        status=Run.Status.RUNNING, lease_owner="dead-worker", lease_expires_at=live
    )
    response = operator.post(_url("run_recover", sent.run.id), {"confirm": "1"}, follow=True)
    assert "holds the run's lease" in _said(response)
    Run.objects.filter(id=sent.run.id).update(
        lease_expires_at=timezone.now() - timedelta(minutes=5)
    )
    response = operator.post(
        "/admin/pai_threads/run/",
        {"action": "recover_runs", "_selected_action": [sent.run.id]},
        follow=True,
    )
    assert "re-dispatched" in _said(response)
    assert wait_for_run(sent.run.id).status == "completed"
    assert hooks.saw(("run_finished", sent.run.id))
    assert any("re-dispatched" in m for m in _logged(Run.objects.get(id=sent.run.id)))


def test_operator_actions_need_the_built_in_permissions(hooks: Hooks) -> None:
    viewer = _staff("viewer")
    run = _waiting("approval")
    action = PendingAction.objects.get(run=run)
    for url in (
        _url("thread_rename", run.thread_id),
        _url("thread_remove", run.thread_id),
        _url("thread_trigger", run.thread_id),
        _url("thread_answer", run.thread_id, action.id),
        _url("run_cancel", run.id),
    ):
        assert viewer.get(url).status_code == 403, url
        assert viewer.post(url, {"confirm": "1", "approved": "true"}).status_code == 403, url
    viewer.post("/admin/pai_threads/run/", {"action": "cancel_runs", "_selected_action": [run.id]})
    assert Run.objects.get(id=run.id).status == "waiting"
    assert PendingAction.objects.get(id=action.id).status == "pending"
    assert not LogEntry.objects.exists()


async def _frames_until(ws: Any, wanted: str) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    while not frames or frames[-1].get("type") != wanted:
        frames.append(await ws.receive_json_from(timeout=10))
    return frames


async def test_a_connected_websocket_client_sees_the_operator_actions(
    hooks: Hooks, wait_for_run: Callable[..., Run]
) -> None:
    """A real ThreadConsumer (channels' communicator) subscribed to the thread receives what an
    operator's approval and rename publish, live."""
    owner = await sync_to_async(User.objects.create_user)("olga", "o@example.com", "pw")
    identity = Identity(scope_key=f"user:{owner.pk}", data={"userId": str(owner.pk)})
    thread = await sync_to_async(services.create_thread)(identity, agent="operated")
    sent = await sync_to_async(services.send)(
        identity, thread.id, {"parts": [{"type": "text", "text": "approval"}]}, dispatch=False
    )
    await aexecute_run(sent.run.id)
    operator = await sync_to_async(_staff)("op", "change_thread", "change_pendingaction")
    action, url = await sync_to_async(_answer_url)(sent.run)

    ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/pai/threads/{thread.id}/")
    ws.scope["user"] = owner
    connected, _ = await ws.connect()
    assert connected
    await _frames_until(ws, "snapshot")
    try:
        await sync_to_async(operator.post)(url, {"approved": "true"})
        answered = await _frames_until(ws, "message.committed")
        assert answered[-1]["message"]["id"] == action.message_id
        await sync_to_async(operator.post)(_url("thread_rename", thread.id), {"title": "Live"})
        updated = await _frames_until(ws, "thread.updated")
        while updated[-1]["thread"]["title"] != "Live":
            updated = await _frames_until(ws, "thread.updated")
        assert (await sync_to_async(wait_for_run)(sent.run.id)).status == "completed"
    finally:
        await ws.disconnect()


def test_every_operator_page_renders_and_links_from_the_change_pages(
    operator: Client, hooks: Hooks
) -> None:
    run = _waiting("approval")
    action, answer = _answer_url(run)
    thread_page = operator.get(_url("thread_change", run.thread_id)).content.decode()
    for name in ("thread_rename", "thread_archive", "thread_trigger", "thread_remove"):
        url = _url(name, run.thread_id)
        assert url in thread_page and operator.get(url).status_code == 200, name
    assert answer in thread_page
    assert answer in operator.get(_url("pendingaction_change", action.id)).content.decode()
    run_page = operator.get(_url("run_change", run.id)).content.decode()
    for name in ("run_cancel", "run_recover"):
        url = _url(name, run.id)
        assert url in run_page and operator.get(url).status_code == 200, name
    response = operator.get(_url("run_cancel", "no such run"), follow=True)
    assert response.status_code == 200 and "not found" in _said(response)
