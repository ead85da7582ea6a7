"""The operator console renders every runtime row readably (issue 12, point 2).

A real toolbox run (reasoning, tool calls in every state, an approval) is executed on the ORM
store; the console's pages are then read with Django's test client as an operator would.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from pai_threads import services
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import File, Message, PendingAction, QueueItem, Run, Step, Thread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def agents(settings: Any) -> None:
    settings.PAI = {
        **settings.PAI,
        "AGENTS": [*settings.PAI["AGENTS"], "tests.support.agents.toolbox"],
    }


MODELS = ("thread", "run", "message", "step", "queueitem", "pendingaction", "file")


def _user(name: str, *, superuser: bool = False, private: bool = False) -> Client:
    if superuser:
        user = User.objects.create_superuser(name, f"{name}@example.com", "pw")
    else:
        user = User.objects.create_user(name, f"{name}@example.com", "pw", is_staff=True)
        codenames = [f"view_{model}" for model in MODELS]
        if private:
            codenames.append("view_private_metadata")
        user.user_permissions.set(
            Permission.objects.filter(content_type__app_label="pai_threads", codename__in=codenames)
        )
    client = Client()
    client.login(username=name, password="pw")
    return client


def _run(identity: Identity, text: str) -> Run:
    thread = services.create_thread(identity, agent="toolbox", title="Console check")
    sent = services.send(
        identity,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": text}]},
        dispatch=False,
    )
    asyncio.run(aexecute_run(sent.run.id))
    return Run.objects.get(id=sent.run.id)


@pytest.fixture
def toolbox_run() -> Run:
    identity = Identity(scope_key="user:olga")
    run = _run(identity, "use tools")
    Thread.objects.filter(id=run.thread_id).update(private_metadata={"crm": "SECRET-CRM-ID"})
    return run


def _change(model: str, pk: object) -> str:
    return reverse(f"admin:pai_threads_{model}_change", args=[quote(pk)])


def test_every_changelist_and_change_page_renders(toolbox_run: Run) -> None:
    operator = _user("op", superuser=True)
    identity = Identity(scope_key="user:olga")
    approval_run = _run(identity, "approval please")
    services.send(  # the thread's run waits: this input queues
        identity,
        approval_run.thread_id,
        {"parts": [{"type": "text", "text": "queued"}]},
        dispatch=False,
    )
    File.objects.create(
        scope_key="user:olga",
        media_type="text/plain",
        filename="notes.txt",
        byte_size=5,
        sha256="0" * 64,
        storage_name="pai/notes.txt",
    )
    rows = {
        "thread": Thread.objects.first(),
        "run": toolbox_run,
        "message": Message.objects.filter(run=toolbox_run, role="assistant").first(),
        "step": Step.objects.filter(run=toolbox_run).first(),
        "queueitem": QueueItem.objects.first(),
        "pendingaction": PendingAction.objects.filter(run=approval_run).first(),
        "file": File.objects.first(),
    }
    for model in MODELS:
        listing = operator.get(f"/admin/pai_threads/{model}/")
        assert listing.status_code == 200, model
        row = rows[model]
        assert row is not None, model
        page = operator.get(_change(model, row.pk))
        assert page.status_code == 200, model
    # No page offers edits: runtime rows change through runtime actions only.
    assert operator.get("/admin/pai_threads/message/add/").status_code == 403


def test_the_run_page_shows_each_step_with_its_request_and_parts(toolbox_run: Run) -> None:
    operator = _user("op", superuser=True)
    page = operator.get(_change("run", toolbox_run.pk)).content.decode()
    assert "step 0" in page and "step 1" in page
    # The effective request: the model and the tools offered, by name.
    assert "scripted" in page and "&quot;add&quot;" in page
    # Parts rendered by type: the reasoning, tool calls with state and their error text.
    assert "Let me use every tool." in page
    assert "tool add" in page and "output-available" in page
    assert "tool boom" in page and "output-error" in page
    # Tokens and cost rolled up from the steps (the scripted model has no price: unpriced).
    tokens = toolbox_run.usage["inputTokens"]
    assert f"&quot;inputTokens&quot;: {tokens}" in page and "&quot;unpricedSteps&quot;: 2" in page


def test_message_search_finds_text_and_run_ids(toolbox_run: Run) -> None:
    operator = _user("op", superuser=True)
    by_text = operator.get("/admin/pai_threads/message/", {"q": "all tools have reported"})
    assert by_text.status_code == 200
    assert by_text.context["cl"].result_count == 1
    by_run = operator.get("/admin/pai_threads/message/", {"q": toolbox_run.id})
    expected = Message.objects.filter(run=toolbox_run).count()
    assert expected >= 3 and by_run.context["cl"].result_count == expected
    nothing = operator.get("/admin/pai_threads/message/", {"q": "no message says this"})
    assert nothing.context["cl"].result_count == 0


def test_filters_narrow_the_lists(toolbox_run: Run) -> None:
    operator = _user("op", superuser=True)
    _run(Identity(scope_key="user:olga"), "approval please")
    waiting = operator.get("/admin/pai_threads/run/", {"status__exact": "waiting"})
    assert [run.status for run in waiting.context["cl"].result_list] == ["waiting"]
    users = operator.get("/admin/pai_threads/message/", {"role__exact": "user"})
    assert {m.role for m in users.context["cl"].result_list} == {"user"}
    tools = operator.get("/admin/pai_threads/thread/", {"agent_name__exact": "toolbox"})
    assert tools.context["cl"].result_count == 2


def test_private_metadata_needs_its_own_permission(toolbox_run: Run) -> None:
    url = _change("thread", toolbox_run.thread_id)
    viewer = _user("viewer")
    page = viewer.get(url)
    assert page.status_code == 200
    assert "SECRET-CRM-ID" not in page.content.decode()
    assert "withheld" in page.content.decode()
    trusted = _user("trusted", private=True)
    assert "SECRET-CRM-ID" in trusted.get(url).content.decode()


def test_a_settled_action_of_an_ended_run_does_not_read_as_executing() -> None:
    operator = _user("op", superuser=True)
    identity = Identity(scope_key="user:olga")
    run = _run(identity, "approval please")
    action = PendingAction.objects.get(run=run)
    PendingAction.objects.filter(pk=action.pk).update(status="executing")
    Run.objects.filter(pk=run.pk).update(status="completed")
    listing = operator.get("/admin/pai_threads/pendingaction/").content.decode()
    assert "done (run completed)" in listing
    assert not re.search(r">executing<", listing)
