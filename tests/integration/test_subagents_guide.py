"""The example of docs/subagents.md, executed from the page: the researcher delegates to the
searcher, the child runs on a hidden thread, and the page's claims about the call's result,
the progress record on the parent's tool part and the usage roll-up hold."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pai_agents import ModelRequest, ScriptedModel, ScriptedStep
from pai_agents.models.scripted import last_user_text
from pai_threads import services
from pai_threads.errors import NotFound
from pai_threads.events.projections import message_public
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, Run
from tests.support.subagent_dispatch import Dispatched, recording_executor

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "subagents.md"
ALICE = Identity(scope_key="user:alice", data={})
SUMMARY = "Three papers on tidal maps; the 2019 survey is the best start."


def _searcher(request: ModelRequest) -> ScriptedStep:
    return ScriptedStep(
        text=SUMMARY, usage={"inputTokens": 40, "outputTokens": 12, "totalTokens": 52}
    )


def _researcher(request: ModelRequest) -> ScriptedStep:
    last = request.messages[-1]
    if last["role"] == "tool":
        [output] = [p["output"] for p in last["content"] if p.get("type") == "tool-result"]
        return ScriptedStep(text=f"From the search: {output['value']['text']}")
    task = f"Find papers on {last_user_text(request)}"
    return ScriptedStep.call("searcher", {"task": task}, id="call-1")


def _example() -> dict[str, Any]:
    """The page's first Python block, with a scripted model for each ``model=...``."""
    [code] = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)[:1]
    assert code.count("model=...") == 2
    code = code.replace("model=...", "model=SEARCHER_MODEL", 1)
    code = code.replace("model=...", "model=RESEARCHER_MODEL", 1)
    namespace: dict[str, Any] = {
        "SEARCHER_MODEL": ScriptedModel(respond=_searcher, record_requests=False),
        "RESEARCHER_MODEL": ScriptedModel(respond=_researcher, record_requests=False),
    }
    exec(compile(code, str(PAGE), "exec"), namespace)
    return namespace


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Dispatched:
    researcher = _example()["researcher"]
    # "List researcher in PAI["AGENTS"]; the searcher is served with it."
    settings.PAI = {**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], researcher]}
    assert registry.get_agent("searcher").name == "searcher"
    return recording_executor(monkeypatch)


def test_the_guides_researcher_delegates_to_the_searcher(executor: Dispatched) -> None:
    thread = services.create_thread(ALICE, agent="researcher")
    sent = services.send(ALICE, thread.id, {"parts": [{"type": "text", "text": "tidal maps"}]})
    assert sent.run is not None
    executor.drain()
    parent = Run.objects.get(pk=sent.run.id)
    child = Run.objects.get(parent_run=parent)
    assert (parent.status, child.status, child.initiator) == ("completed", "completed", "subagent")
    # thread="hidden": linked to the parent run, not listed.
    assert child.thread.parent_run_id == parent.id
    assert child.thread_id not in {t.id for t in services.list_threads(ALICE).items}
    # Not listed, but its owner may open it (to watch the child live); nobody else may.
    assert services.get_thread(ALICE, child.thread_id).id == child.thread_id
    with pytest.raises(NotFound):
        services.get_thread(Identity(scope_key="user:mallory", data={}), child.thread_id)
    assert Message.objects.filter(thread=child.thread, role="user").get().parts == [
        {"type": "text", "text": "Find papers on tidal maps"}
    ]
    rows = Message.objects.filter(thread=thread, role="assistant").order_by("created_at")
    parts = [p for row in rows for p in message_public(row)["parts"]]
    [part] = [p for p in parts if p.get("type") == "tool-searcher"]
    # completed: {"text", "threadId", "runId"}; the progress record on the tool part.
    assert part["output"] == {"text": SUMMARY, "threadId": child.thread_id, "runId": child.id}
    [record] = part["data"]["subagent"]
    assert record["value"] == {
        "runId": child.id,
        "threadId": child.thread_id,
        "status": "completed",
        "steps": 1,
        "text": SUMMARY,
    }
    assert parts[-1]["text"] == f"From the search: {SUMMARY}"
    # Usage rolls up: the parent's run counts the child's step.
    own = [s.usage for s in parent.steps.all()]
    assert parent.usage["inputTokens"] == 40 + sum(u.get("inputTokens", 0) for u in own)
    assert json.dumps(parent.usage)  # plain JSON, as stored
