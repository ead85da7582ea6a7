"""Access checks happen before acceptance (LC-068): a refused send or trigger stores no
message, run or queue item, and no prepare_run ever sees it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, Literal

import pytest
from django.test import Client
from pydantic import BaseModel, ConfigDict

from pai_agents import ScriptedModel, ScriptedStep, define_agent
from pai_threads import services
from pai_threads.errors import InvalidInput, NotFound, ThreadBusy
from pai_threads.execution import registry
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Message, QueueItem, Run, Thread

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"


class Who(BaseModel):
    userId: str


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    plan: Literal["free", "pro"] = "free"


prepared: list[str] = []


@pytest.fixture(autouse=True)
def guarded(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent with identity and client-data schemas, the reject send policy, and a
    prepare_run that records every run it sees."""
    prepared.clear()
    agent = define_agent(
        "guarded",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep.reply("ok")] * 4),
        identity=Who,
        client_data=Plan,
        send_policy="reject",
        lifecycle={"prepare_run": lambda i: prepared.append(i.run.run_id)},
    )
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)


def _rows() -> tuple[int, int, int]:
    return Message.objects.count(), Run.objects.count(), QueueItem.objects.count()


def _text(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "text": text}]}


def _execute_all() -> None:
    """Run every run that exists: whatever was accepted reaches prepare_run."""
    for run_id in Run.objects.filter(status=Run.Status.QUEUED).values_list("id", flat=True):
        asyncio.run(aexecute_run(run_id))


def _refused(call: Callable[[], Any], error: type[Exception]) -> None:
    before = _rows()
    with pytest.raises(error):
        call()
    assert _rows() == before


def test_lc_068_refused_sends_store_nothing_and_never_reach_prepare_run(
    alice: Identity, bob: Identity
) -> None:
    """LC-068: another partition's thread (NotFound), an identity or client data failing
    the agent's schema (InvalidInput) and the reject policy on a busy thread (ThreadBusy)
    create no message, run or queue item; only the accepted send reaches prepare_run."""
    thread = services.create_thread(alice, agent="guarded")
    stranger = Identity(scope_key="user:mallory", data={"role": "none"})
    _refused(lambda: services.send(bob, thread.id, _text(), dispatch=False), NotFound)
    _refused(lambda: services.send(stranger, thread.id, _text(), dispatch=False), NotFound)
    nameless = Identity(scope_key=alice.scope_key, data={"name": "alice"})
    _refused(lambda: services.send(nameless, thread.id, _text(), dispatch=False), InvalidInput)
    _refused(
        lambda: services.send(
            alice, thread.id, _text(), client_data={"plan": "gold"}, dispatch=False
        ),
        InvalidInput,
    )
    _refused(
        lambda: services.send(
            alice, thread.id, _text(), client_data={"admin": True}, dispatch=False
        ),
        InvalidInput,
    )
    assert prepared == []

    accepted = services.send(alice, thread.id, _text("first"), dispatch=False)
    assert accepted.run is not None
    _refused(lambda: services.send(alice, thread.id, _text("second"), dispatch=False), ThreadBusy)
    _execute_all()
    assert prepared == [accepted.run.id]
    assert list(Message.objects.filter(role="user").values_list("parts", flat=True)) == [
        _text("first")["parts"]
    ]


def test_lc_068_refused_triggers_store_nothing_and_never_reach_prepare_run(
    alice: Identity, bob: Identity
) -> None:
    """LC-068: a trigger is checked the same way before its run is created: other
    partition, bad identity, bad client data, busy thread."""
    thread = services.create_thread(alice, agent="guarded")
    _refused(lambda: services.trigger(bob, thread.id, dispatch=False), NotFound)
    nameless = Identity(scope_key=alice.scope_key, data={})
    _refused(lambda: services.trigger(nameless, thread.id, dispatch=False), InvalidInput)
    _refused(
        lambda: services.trigger(alice, thread.id, client_data={"plan": "gold"}, dispatch=False),
        InvalidInput,
    )
    accepted = services.trigger(alice, thread.id, client_data={"plan": "pro"}, dispatch=False)
    _refused(lambda: services.trigger(alice, thread.id, dispatch=False), ThreadBusy)
    _execute_all()
    assert prepared == [accepted.id]
    assert Message.objects.filter(role="user").count() == 0


def _post(client: Client, path: str, body: Any) -> Any:
    client.get("/")  # the page sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    return client.post(
        f"{API}{path}",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )


def test_lc_068_http_refusals_are_typed_and_store_nothing(
    api_client: Client, alice: Identity
) -> None:
    """LC-068 over HTTP: another identity's thread is 404, an identity the agent's schema
    refuses (the anonymous session has no userId) is 422; nothing is stored either way."""
    theirs = services.create_thread(alice, agent="guarded")
    before = _rows()
    response = _post(api_client, f"/threads/{theirs.id}/messages", {"text": "hi"})
    assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")

    mine = _post(api_client, "/threads", {"agent": "guarded"}).json()
    response = _post(api_client, f"/threads/{mine['id']}/messages", {"text": "hi"})
    assert (response.status_code, response.json()["error"]["code"]) == (422, "invalid_input")
    assert _rows() == before
    assert Thread.objects.get(id=mine["id"]).messages.count() == 0
    _execute_all()
    assert prepared == []
