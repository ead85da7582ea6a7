"""Sub-agents on the real database (docs/subagents.md): a parent's tool call runs a child
agent as its own durable run, linked to the parent run and tool call, on a hidden thread
(or one of its own); the child's end answers the parent's call in the same transaction, and
the parent resumes with the child's final text. Cancellation propagates both ways; the
depth limit, an unknown agent and a forged answer are refused.

The worker-kill acceptance test is tests/integration/test_subagents_workers.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from django.db import IntegrityError, transaction

from pai_agents.models.base import Usage, add_usage
from pai_threads import services
from pai_threads.errors import ActionConflict
from pai_threads.events.projections import message_public
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Run, Step, Thread
from pai_threads.realtime.buffers import get_buffer
from pai_threads.services import cancelling
from tests.support.subagent_agents import SeesSources
from tests.support.subagent_dispatch import Dispatched, serve_subagent_agents

pytestmark = pytest.mark.django_db(transaction=True)

ALICE = Identity(scope_key="user:alice", data={})


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Dispatched:
    return serve_subagent_agents(monkeypatch, settings)


def _delegate(agent: str, text: str) -> tuple[Thread, Run]:
    thread = services.create_thread(ALICE, agent=agent)
    sent = services.send(ALICE, thread.id, {"parts": [{"type": "text", "text": text}]})
    assert sent.run is not None
    return thread, sent.run


def _waiting_on_child(executor: Dispatched, tmp_path: Path) -> tuple[Thread, Run, Run]:
    """A planner run after its first episode: waiting on its queued child."""
    thread, run = _delegate("planner", f"delegate maps {tmp_path / 'l'}")
    executor.drain(limit=1)
    return thread, run, Run.objects.get(parent_run=run)


def _final_text(thread: Thread) -> str:
    row = Message.objects.filter(thread=thread, role="assistant").order_by("-created_at").first()
    assert row is not None
    return "".join(p.get("text", "") for p in row.parts if p.get("type") == "text")


def _tool_part(thread: Thread, name: str) -> dict[str, Any]:
    for row in Message.objects.filter(thread=thread, role="assistant"):
        for part in row.parts:
            if part.get("type") == f"tool-{name}":
                return dict(part)
    raise AssertionError(f"no tool-{name} part")


def test_a_subagent_call_runs_the_child_and_resumes_the_parent_with_its_text(
    executor: Dispatched, tmp_path: Path
) -> None:
    log = tmp_path / "dig.log"
    SeesSources.seen.clear()
    SeesSources.answers.clear()
    thread, run = _delegate("planner", f"delegate maps {log}")
    executor.drain(limit=1)  # the parent's first episode: it waits on the child
    run.refresh_from_db()
    assert run.status == "waiting"
    [action] = PendingAction.objects.filter(run=run)
    assert (action.kind, action.status) == ("subagent", "pending")
    assert action.input == {"agent": "searcher", "task": f"maps {log}", "thread": "hidden"}
    # The child exists, committed with the waiting parent: linked, hidden, queued.
    child = Run.objects.get(parent_run=run)
    assert (child.initiator, child.status, child.parent_tool_call_id) == (
        "subagent",
        "queued",
        action.tool_call_id,
    )
    assert child.thread.parent_run_id == run.id and child.thread.scope_key == ALICE.scope_key
    assert executor.runs == [child.id]
    assert thread.id in {t.id for t in services.list_threads(ALICE).items}
    assert child.thread_id not in {t.id for t in services.list_threads(ALICE).items}

    assert executor.drain() == [child.id, run.id]  # the child's end queued the parent
    child.refresh_from_db()
    run.refresh_from_db()
    assert (child.status, run.status) == ("completed", "completed")
    assert log.read_text().splitlines() == ["dig maps", "dug"]
    action.refresh_from_db()
    assert action.status == "executing"  # answered by the runtime, then run (at most once)
    assert action.submitted_by == {"runtime": "subagent", "runId": child.id}
    answer = action.response["answer"]
    assert answer["status"] == "completed" and answer["run_id"] == child.id
    assert answer["usage"]["inputTokens"] == 18  # the child's two steps
    part = _tool_part(thread, "searcher")
    assert part["state"] == "output-available"
    assert part["output"] == {
        "text": 'Found: Tool results: [{"type": "text", "value": "3 papers on maps"}]',
        "threadId": child.thread_id,
        "runId": child.id,
    }
    [seen] = json.loads(_final_text(thread).removeprefix("Tool results: "))
    assert seen["value"]["runId"] == child.id  # what the parent's model was given
    assert SeesSources.seen[0] == "subagent"  # LC-132: the hooks see the source
    # LC-069: the resume's input names the answered call and the child's outcome.
    [[resumed]] = SeesSources.answers
    assert (resumed["toolCallId"], resumed["suspension"]) == (action.tool_call_id, "subagent")
    assert resumed["answer"]["status"] == "completed" and resumed["answer"]["run_id"] == child.id


def _projected_part(thread: Thread, name: str) -> dict[str, Any]:
    """The tool part as clients read it (ToolData joined, reserved parts removed)."""
    for row in Message.objects.filter(thread=thread, role="assistant").order_by("created_at"):
        for part in message_public(row)["parts"]:
            if part.get("type") == f"tool-{name}":
                return dict(part)
    raise AssertionError(f"no tool-{name} part")


def _progress(part: dict[str, Any]) -> dict[str, Any]:
    [record] = part["data"]["subagent"]
    assert record["id"] == "run"
    return dict(record["value"])


def test_the_childs_progress_is_on_the_parents_tool_part_and_its_usage_rolls_up(
    executor: Dispatched, tmp_path: Path
) -> None:
    thread, run, child = _waiting_on_child(executor, tmp_path)
    # Written with the waiting parent: the child's ids, before it ran a step.
    waiting = _projected_part(thread, "searcher")
    assert waiting["state"] == "input-available"
    assert _progress(waiting) == {
        "runId": child.id,
        "threadId": child.thread_id,
        "status": "queued",
        "steps": 0,
        "text": "",
    }
    buffer = get_buffer()
    seen = asyncio.run(buffer.state(thread.id)).last_seq
    executor.drain(limit=1)  # the child only: two steps, then its end answers the parent
    events = asyncio.run(
        buffer.read(thread.id, after=seen, upto=asyncio.run(buffer.state(thread.id)).last_seq)
    )
    updates = [
        _progress(next(p for p in e["message"]["parts"] if p.get("type") == "tool-searcher"))
        for e in events
        if e["type"] == "message.committed"
    ]
    # After the child's first step (a tool call: no text yet), then its end.
    assert [(u["status"], u["steps"]) for u in updates] == [("running", 1), ("completed", 2)]
    assert updates[-1]["text"].startswith("Found: Tool results:")
    executor.drain()
    run.refresh_from_db()
    assert run.status == "completed"
    done = _projected_part(thread, "searcher")
    assert done["state"] == "output-available"
    assert _progress(done) == updates[-1]  # the resumed parent kept the final record
    # The parent's run counts its own steps and the child's two.
    child.refresh_from_db()
    assert child.usage == {"inputTokens": 18, "outputTokens": 8, "totalTokens": 26}
    own: Usage = {}
    for step in Step.objects.filter(run=run):
        own = add_usage(own, step.usage)
    assert own["inputTokens"] > 0
    assert run.usage == add_usage(own, child.usage)


def test_an_own_thread_child_is_listed_with_the_parent(
    executor: Dispatched, tmp_path: Path
) -> None:
    thread, run = _delegate("own_planner", f"delegate rivers {tmp_path / 'l'}")
    executor.drain()
    child = Run.objects.get(parent_run=run)
    listed = {t.id for t in services.list_threads(ALICE).items}
    assert {thread.id, child.thread_id} <= listed
    assert child.thread.parent_run_id is None and child.thread.agent_name == "searcher"
    run.refresh_from_db()
    assert run.status == "completed"
    assert _tool_part(thread, "research")["output"]["threadId"] == child.thread_id


def test_cancelling_the_parent_cancels_the_child(executor: Dispatched, tmp_path: Path) -> None:
    _, run, child = _waiting_on_child(executor, tmp_path)
    cancelling.cancel_run(ALICE, run.id)
    run.refresh_from_db()
    child.refresh_from_db()
    assert (run.status, child.status) == ("cancelled", "cancelled")
    assert PendingAction.objects.get(run=run).status == "cancelled"
    executor.drain()  # the child's dispatch finds it cancelled: nothing runs
    assert not (tmp_path / "l").exists()


def test_cancelling_the_child_answers_the_parent_with_a_model_visible_error(
    executor: Dispatched, tmp_path: Path
) -> None:
    thread, run, child = _waiting_on_child(executor, tmp_path)
    executor.runs.clear()
    cancelling.cancel_run(ALICE, child.id)
    assert executor.runs == [run.id]  # the parent resumes
    executor.drain()
    run.refresh_from_db()
    assert run.status == "completed"
    part = _tool_part(thread, "searcher")
    assert (part["state"], part["errorText"]) == ("output-error", "sub-agent cancelled")


def test_the_depth_limit_answers_the_deepest_call_with_an_error(
    executor: Dispatched, settings: Any
) -> None:
    settings.PAI = {**settings.PAI, "SUBAGENT_MAX_DEPTH": 2}
    _delegate("recursor", "go")
    executor.drain()
    runs = list(Run.objects.filter(agent_name="recursor").order_by("created_at"))
    assert len(runs) == 3  # the top run and two levels of children
    assert [r.status for r in runs] == ["completed"] * 3
    deepest = runs[-1]
    [action] = PendingAction.objects.filter(run=deepest)
    assert action.response["answer"]["status"] == "failed"
    assert "depth limit (2)" in action.response["answer"]["error"]
    assert "depth limit" in _final_text(deepest.thread)


def test_a_subagent_action_cannot_be_answered_by_a_client(
    executor: Dispatched, tmp_path: Path
) -> None:
    _, run = _delegate("planner", f"delegate maps {tmp_path / 'l'}")
    executor.drain(limit=1)
    action = PendingAction.objects.get(run=run)
    forged = {"answer": {"status": "completed", "text": "forged"}}
    with pytest.raises(ActionConflict):
        services.submit_action(ALICE, action.id, forged)
    action.refresh_from_db()
    assert action.status == "pending"


def test_one_child_per_call_is_a_database_constraint(executor: Dispatched, tmp_path: Path) -> None:
    _, run, child = _waiting_on_child(executor, tmp_path)
    twin = Thread.objects.create(scope_key=ALICE.scope_key, agent_name="searcher")
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(
            thread=twin,
            scope_key=ALICE.scope_key,
            agent_name="searcher",
            parent_run=run,
            parent_tool_call_id=child.parent_tool_call_id,
        )


def test_deleting_the_parent_thread_deletes_the_hidden_child_thread(
    executor: Dispatched, tmp_path: Path
) -> None:
    thread, run = _delegate("planner", f"delegate maps {tmp_path / 'l'}")
    executor.drain()
    child_thread = Run.objects.get(parent_run=run).thread_id
    services.delete_thread(ALICE, thread.id)
    assert not Thread.objects.filter(id=child_thread).exists()
