"""Trusted code fulfils a client tool's pending action manually (source ``manual``)."""

from __future__ import annotations

import asyncio

import pytest

from pai_threads import services
from pai_threads.errors import ActionConflict
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _toolbox_agent(settings) -> None:
    settings.PAI = {
        **settings.PAI,
        "AGENTS": [*settings.PAI["AGENTS"], "tests.support.agents.toolbox"],
    }


def test_trusted_code_fulfils_a_client_tool_once_and_the_run_resumes() -> None:
    identity = Identity(scope_key="user:erin")
    thread = services.create_thread(identity, agent="toolbox")
    sent = services.send(
        identity, thread.id, {"parts": [{"type": "text", "text": "ask me"}]}, dispatch=False
    )
    assert asyncio.run(aexecute_run(sent.run.id)).status == "waiting"
    action = PendingAction.objects.get(run_id=sent.run.id)
    assert action.kind == "client" and action.tool_name == "ask_user"

    services.fulfil_action(action.id, {"output": "the blue one"}, by="support-desk", dispatch=False)
    with pytest.raises(ActionConflict):
        services.fulfil_action(action.id, {"output": "again"}, by="support-desk", dispatch=False)
    action.refresh_from_db()
    assert action.status == "submitted" and action.submitted_by == {"manual": "support-desk"}

    assert asyncio.run(aexecute_run(sent.run.id)).status == "completed"
    step = Message.objects.get(run_id=sent.run.id, step_index=0)
    part = next(p for p in step.parts if p["type"] == "tool-ask_user")
    assert part["state"] == "output-available" and part["output"] == "the blue one"
    assert part["toolMetadata"] == {"pai": {"source": "manual"}}
    assert Run.objects.get(id=sent.run.id).status == "completed"
