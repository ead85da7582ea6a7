"""Sub-agent runs in the operator console (issue 13, point 5; docs/subagents.md, "In the
admin"): a parent run's page lists its child runs, a child's page links to its parent, a
hidden child thread says whose it is, the run list filters to sub-agent runs, and the
parent's page costs the same queries however many children it has.

The parent and child are made through the real path (the planner's sub-agent call, run in
process by the ORM store as tests/integration/test_subagents.py does); extra children for the
query bound are rows made directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Run, Thread
from tests.support.subagent_dispatch import Dispatched, serve_subagent_agents

pytestmark = pytest.mark.django_db(transaction=True)

ALICE = Identity(scope_key="user:alice", data={})


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Dispatched:
    return serve_subagent_agents(monkeypatch, settings)


@pytest.fixture
def family(executor: Dispatched, tmp_path: Path) -> tuple[Run, Run]:
    """A completed planner run and the completed searcher run of its sub-agent call."""
    thread = services.create_thread(ALICE, agent="planner")
    text = f"delegate maps {tmp_path / 'dig.log'}"
    sent = services.send(ALICE, thread.id, {"parts": [{"type": "text", "text": text}]})
    assert sent.run is not None
    executor.drain()
    parent = Run.objects.get(id=sent.run.id)
    child = Run.objects.select_related("thread").get(parent_run=parent)
    assert (parent.status, child.status, child.initiator) == ("completed", "completed", "subagent")
    return parent, child


def _url(model: str, pk: object) -> str:
    return reverse(f"admin:pai_threads_{model}_change", args=[quote(pk)])


def _page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return str(response.content.decode())


def _more_children(parent: Run, count: int) -> None:
    """Completed sub-agent runs of ``parent`` on hidden threads, made as rows."""
    for n in range(count):
        thread = Thread.objects.create(
            scope_key=parent.scope_key, agent_name="searcher", parent_run=parent
        )
        Run.objects.create(
            thread=thread,
            scope_key=parent.scope_key,
            agent_name="searcher",
            status=Run.Status.COMPLETED,
            initiator=Run.Initiator.SUBAGENT,
            parent_run=parent,
            parent_tool_call_id=f"call-extra-{n}",
            usage={"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        )


def test_the_parent_run_page_lists_its_sub_agent_runs(
    operator: Client, family: tuple[Run, Run]
) -> None:
    parent, child = family
    page = _page(operator, _url("run", parent.id))
    assert "Sub-agent runs" in page
    # The child: linked to its page and its (hidden) thread, with agent, status, tool
    # call, tokens (the searcher's two steps: 11 + 7 in, 3 + 5 out).
    assert _url("run", child.id) in page and _url("thread", child.thread_id) in page
    assert child.parent_tool_call_id in page
    assert "searcher" in page and "18 in / 8 out" in page
    assert f"{child.id} (completed)" in page  # the inline row's heading: id and status
    assert "Parent run:" not in page  # a top-level run has no parent field


def test_the_child_run_page_links_to_its_parent_and_tool_call(
    operator: Client, family: tuple[Run, Run]
) -> None:
    parent, child = family
    page = _page(operator, _url("run", child.id))
    assert "Parent run:" in page
    assert _url("run", parent.id) in page and child.parent_tool_call_id in page
    assert "agent planner" in page


def test_a_sub_agent_run_whose_parent_is_gone_says_so(operator: Client) -> None:
    """An ``own`` child thread outlives the parent's thread; the link is SET_NULL."""
    parent_thread = Thread.objects.create(scope_key="user:alice", agent_name="own_planner")
    parent = Run.objects.create(
        thread=parent_thread, scope_key="user:alice", agent_name="own_planner", status="completed"
    )
    own = Thread.objects.create(scope_key="user:alice", agent_name="searcher")
    child = Run.objects.create(
        thread=own,
        scope_key="user:alice",
        agent_name="searcher",
        status="completed",
        initiator=Run.Initiator.SUBAGENT,
        parent_run=parent,
        parent_tool_call_id="call-orphan",
    )
    parent_thread.delete()
    page = _page(operator, _url("run", child.id))
    assert "Parent run:" in page and "deleted" in page and "call-orphan" in page


def test_a_hidden_thread_page_names_the_run_it_serves(
    operator: Client, family: tuple[Run, Run]
) -> None:
    parent, child = family
    hidden = _page(operator, _url("thread", child.thread_id))
    assert "Hidden sub-agent thread of run" in hidden and _url("run", parent.id) in hidden
    listed = _page(operator, _url("thread", parent.thread_id))
    assert "Hidden sub-agent thread" not in listed


def test_the_lists_filter_to_sub_agent_runs_and_hidden_threads(
    operator: Client, family: tuple[Run, Run]
) -> None:
    parent, child = family
    runs = operator.get("/admin/pai_threads/run/", {"initiator__exact": "subagent"})
    assert [run.id for run in runs.context["cl"].result_list] == [child.id]
    # The parent column links each child to its parent.
    assert _url("run", parent.id) in runs.content.decode()
    found = operator.get("/admin/pai_threads/run/", {"q": parent.id})
    assert {run.id for run in found.context["cl"].result_list} == {parent.id, child.id}
    hidden = operator.get("/admin/pai_threads/thread/", {"parent_run__isempty": "0"})
    assert [thread.id for thread in hidden.context["cl"].result_list] == [child.thread_id]
    listed = operator.get("/admin/pai_threads/thread/", {"parent_run__isempty": "1"})
    assert [thread.id for thread in listed.context["cl"].result_list] == [parent.thread_id]


def _queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def test_the_parent_page_costs_the_same_queries_for_one_or_many_children(
    operator: Client, family: tuple[Run, Run]
) -> None:
    parent, _ = family
    url = _url("run", parent.id)
    _queries(operator, url)  # warm: the session, content types
    one = _queries(operator, url)
    _more_children(parent, 4)
    assert "call-extra-3" in _page(operator, url)
    assert _queries(operator, url) == one
