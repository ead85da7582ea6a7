"""Agent-definition rules (AD-*) on the real database: identity and client data at the send
boundary, partitions, what never leaves the server, and what clients cannot write."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, Literal

import pytest
from channels.layers import get_channel_layer
from django.apps import apps
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from pydantic import BaseModel

from pai_agents import (
    AgentBehaviorInput,
    RecordingSink,
    RunEngine,
    RunOutcome,
    ScriptedModel,
    ScriptedStep,
    ToolContext,
    define_agent,
    tool,
)
from pai_threads import services
from pai_threads.api import api
from pai_threads.errors import InvalidInput, NotFound
from pai_threads.execution import registry
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Thread
from pai_threads.store.thread_store import ORMThreadStore
from pai_threads.websocket.commands import COMMANDS, run_command
from pai_threads.websocket.snapshot import build_snapshot, thread_public

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"
SECRET = "sk-server-only-SECRET-4242"


def _register(monkeypatch: pytest.MonkeyPatch, agent: Any) -> None:
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)


def _message(text: str = "hello") -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "text": text}]}


async def _execute(run_id: str, agent: Any) -> RunOutcome:
    store = ORMThreadStore()
    claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
    return await RunEngine(agent=agent, store=store, sink=RecordingSink()).run_episode(claim)


def _all_rows() -> str:
    """Every row of every PAI table, as JSON text."""
    models = apps.get_app_config("pai_threads").get_models()
    return json.dumps([list(m.objects.values()) for m in models], default=str)


# --------------------------------------------------------------------------- define_agent


class Empty(BaseModel):
    pass


def _url_patterns(patterns: Sequence[Any], prefix: str = "") -> set[str]:
    found: set[str] = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found |= _url_patterns(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            found.add(prefix + str(pattern.pattern))
    return found


def test_ad_001_define_agent_creates_no_rows_routes_tasks_or_subscriptions(
    alice: Identity,
) -> None:
    """AD-001: defining an agent (even one with tools and hooks) touches no table, adds no
    URL route, registers no worker task or agent, and subscribes to nothing."""
    from pai_project.celery import app as celery_app

    services.send(alice, services.create_thread(alice).id, _message(), dispatch=False)
    rows = _all_rows()
    routes = _url_patterns(get_resolver().url_patterns)
    tasks = set(celery_app.tasks)
    groups = dict(getattr(get_channel_layer(), "groups", {}))
    agents = dict(registry.agents())

    @tool(input=Empty)
    def noop(args: Empty) -> None:
        """Nothing."""

    define_agent(
        "ad-inert",
        instructions="x",
        model=ScriptedModel(),
        tools=[noop],
        lifecycle={"prepare_run": lambda input: None},
    )

    assert _all_rows() == rows
    assert _url_patterns(get_resolver().url_patterns) == routes
    assert set(celery_app.tasks) == tasks
    assert dict(getattr(get_channel_layer(), "groups", {})) == groups
    assert dict(registry.agents()) == agents


# --------------------------------------------------------------------------- identity


class WorkspaceIdentity(BaseModel):
    userId: str
    role: Literal["member", "admin"] = "member"


def test_ad_009_the_resolved_identity_is_validated_and_an_invalid_one_refused(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AD-009: the trusted identity is parsed with the agent's ``identity`` schema (the run
    keeps the parsed value); an identity the schema rejects stores nothing."""
    agent = define_agent(
        "ad-identity", instructions="x", model=ScriptedModel(), identity=WorkspaceIdentity
    )
    _register(monkeypatch, agent)
    thread = services.create_thread(alice, agent="ad-identity")
    sent = services.send(alice, thread.id, _message(), dispatch=False)
    assert sent.run is not None
    assert Run.objects.get(pk=sent.run.pk).identity == {"userId": "alice", "role": "member"}

    mallory = Identity(scope_key="user:mallory", data={"role": "root"})
    other = services.create_thread(mallory, agent="ad-identity")
    with pytest.raises(InvalidInput):
        services.send(mallory, other.id, _message(), dispatch=False)
    assert not Message.objects.filter(thread=other).exists()
    assert not Run.objects.filter(thread=other).exists()


class Tabs(BaseModel):
    tab: str = "inbox"
    page: int = 1


def test_ad_010_client_data_is_parsed_and_builders_receive_the_parsed_value(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AD-010: ``client_data`` is parsed with its schema (defaults, coercion); the runtime
    context builder, resolvers and hooks get the parsed output; invalid data is refused."""
    seen: dict[str, Any] = {}

    def runtime_context(input: AgentBehaviorInput) -> None:
        seen["builder"] = input.client_data

    def instructions(behavior: AgentBehaviorInput) -> str:
        seen["instructions"] = behavior.client_data
        return "x"

    def enabled(behavior: AgentBehaviorInput) -> bool:
        seen["enabled"] = behavior.client_data
        return True

    @tool(input=Empty)
    def noop(args: Empty) -> None:
        """Nothing."""

    from pai_agents.agent import ToolConfig

    agent = define_agent(
        "ad-client-data",
        instructions=instructions,
        model=ScriptedModel(steps=[ScriptedStep.reply("ok")]),
        client_data=Tabs,
        runtime_context=runtime_context,
        tools=[ToolConfig(tool=noop, enabled=enabled)],
    )
    _register(monkeypatch, agent)
    thread = services.create_thread(alice, agent="ad-client-data")
    sent = services.send(alice, thread.id, _message(), client_data={"page": "2"}, dispatch=False)
    assert sent.run is not None
    parsed = {"tab": "inbox", "page": 2}
    assert Run.objects.get(pk=sent.run.pk).client_data == parsed
    assert asyncio.run(_execute(sent.run.id, agent)).status == "completed"
    assert seen == {"builder": parsed, "instructions": parsed, "enabled": parsed}

    fresh = services.create_thread(alice, agent="ad-client-data")
    with pytest.raises(InvalidInput):
        services.send(alice, fresh.id, _message(), client_data={"page": "two"}, dispatch=False)
    assert not Message.objects.filter(thread=fresh).exists()


def test_ad_011_client_data_never_changes_which_threads_a_caller_reaches(
    alice: Identity, bob: Identity
) -> None:
    """AD-011: the partition and actor come from the trusted identity only: client data
    naming another scope neither opens that scope's threads nor moves the caller's rows."""
    alices = services.create_thread(alice)
    services.send(alice, alices.id, _message(), dispatch=False)
    forged = {"scopeKey": alice.scope_key, "scope_key": alice.scope_key, "userId": "alice"}

    with pytest.raises(NotFound):
        services.send(bob, alices.id, _message("mine now"), client_data=forged, dispatch=False)
    assert Message.objects.filter(thread=alices).count() == 1

    bobs = services.create_thread(bob)
    sent = services.send(bob, bobs.id, _message(), client_data=forged, dispatch=False)
    assert sent.run is not None and sent.message is not None
    run = Run.objects.get(pk=sent.run.pk)
    assert run.scope_key == bob.scope_key and run.identity == dict(bob.data)
    assert Message.objects.get(pk=sent.message.pk).scope_key == bob.scope_key
    assert [t.id for t in services.list_threads(bob).items] == [bobs.id]
    assert [t.id for t in services.list_threads(alice).items] == [alices.id]


# --------------------------------------------------------------------------- never sent


class KeyArgs(BaseModel):
    service: str


@tool(input=KeyArgs)
def call_service(args: KeyArgs, ctx: ToolContext) -> dict[str, Any]:
    """Calls a service with the runtime context's key."""
    return {"service": args.service, "authorized": ctx.runtime_context["apiKey"] == SECRET}


def test_ad_015_runtime_context_is_never_persisted_or_sent_to_clients(
    alice: Identity, monkeypatch: pytest.MonkeyPatch, published: list[dict[str, Any]]
) -> None:
    """AD-015: a secret in the runtime context reaches the tool but no table, no realtime
    event and no client snapshot."""
    agent = define_agent(
        "ad-secret",
        instructions=lambda behavior: f"Workspace {behavior.runtime_context['workspace']}.",
        model=ScriptedModel(
            steps=[ScriptedStep.call("call_service", {"service": "crm"}), ScriptedStep.reply("ok")]
        ),
        runtime_context=lambda input: {"apiKey": SECRET, "workspace": "w1"},
        tools=[call_service],
    )
    _register(monkeypatch, agent)
    thread = services.create_thread(alice, agent="ad-secret")
    sent = services.send(alice, thread.id, _message(), dispatch=False)
    assert sent.run is not None
    sink = RecordingSink()
    outcome = asyncio.run(aexecute_run(sent.run.id, sink=sink))

    assert outcome is not None and outcome.status == "completed"
    tool_part = next(
        p
        for m in build_snapshot(alice, thread.id)["messages"]
        for p in m["parts"]
        if p["type"] == "tool-call_service"
    )
    assert tool_part["output"] == {"service": "crm", "authorized": True}
    assert published, "the run published realtime events"
    assert SECRET not in _all_rows()
    assert SECRET not in json.dumps(sink.events, default=str)
    assert SECRET not in json.dumps(published, default=str)
    assert SECRET not in json.dumps(build_snapshot(alice, thread.id), default=str)


# --------------------------------------------------------------------------- client writes


def _csrf(client: Client) -> dict[str, str]:
    client.get("/")
    token = client.cookies.get("csrftoken")
    return {"HTTP_X_CSRFTOKEN": token.value} if token else {}


def _json(client: Client, method: str, path: str, body: Any, **extra: Any) -> Any:
    call = getattr(client, method)
    return call(f"{API}{path}", data=json.dumps(body), content_type="application/json", **extra)


def test_ad_035_the_client_api_cannot_write_run_or_thread_metadata(api_client: Client) -> None:
    """AD-035: no HTTP body or websocket command writes run or thread metadata, public or
    private: such fields are refused and nothing changes."""
    headers = _csrf(api_client)
    for body in ({"title": "t", "metadata": {"a": 1}}, {"privateMetadata": {"a": 1}}):
        assert _json(api_client, "post", "/threads", body, **headers).status_code == 422
    assert not Thread.objects.exists()

    thread = _json(api_client, "post", "/threads", {"title": "t"}, **headers).json()
    for body in (
        {"title": "x", "metadata": {"a": 1}},
        {"title": "x", "privateMetadata": {"a": 1}},
    ):
        # Refused or ignored (a rename takes the title only): never written.
        patched = _json(api_client, "patch", f"/threads/{thread['id']}", body, **headers)
        assert patched.status_code in (200, 422)
    for body in (
        {"text": "hi", "runMetadata": {"rating": "up"}},
        {"text": "hi", "metadata": {"rating": "up"}},
        {"text": "hi", "threadMetadata": {"a": 1}},
    ):
        sent = _json(api_client, "post", f"/threads/{thread['id']}/messages", body, **headers)
        assert sent.status_code == 422
    stored = Thread.objects.get(id=thread["id"])
    assert (stored.metadata, stored.private_metadata) == ({}, {})
    assert not Run.objects.exists()

    schema = api.get_openapi_schema()
    components = schema["components"]["schemas"]
    written: set[str] = set()
    for operations in schema["paths"].values():
        for operation in operations.values():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                name = body["schema"]["$ref"].rsplit("/", 1)[-1]
                written |= set(components[name].get("properties", {}))
    assert not written & {"metadata", "privateMetadata", "runMetadata", "threadMetadata"}
    assert set(COMMANDS) == {"send", "rename", "cancel", "regenerate", "submit-action"}
    reply = asyncio.run(
        run_command(
            Identity(scope_key="user:x"),
            thread["id"],
            {"type": "set-metadata", "metadata": {"a": 1}},
        )
    )
    assert reply["type"] == "error" and reply["code"] == "unknown_command"


# --------------------------------------------------------------------------- projections


def test_ad_037_private_thread_metadata_stays_off_every_client_surface(
    alice: Identity, api_client: Client, published: list[dict[str, Any]]
) -> None:
    """AD-037: private thread metadata is absent from thread heads, lists, state snapshots
    and realtime events; public thread metadata is the thread's ``metadata``."""
    thread = services.create_thread(alice)
    sent = services.send(alice, thread.id, _message(), dispatch=False)
    assert sent.run is not None

    async def prepare_run(input: Any) -> None:
        async def both(tx: Any) -> None:
            await tx.metadata.merge({"category": "billing"})
            await tx.private_metadata.merge({"cursor": SECRET})

        await input.thread.mutate(both)

    agent = define_agent(
        "ad-thread-meta",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep.reply("ok")]),
        lifecycle={"prepare_run": prepare_run},
    )
    assert asyncio.run(_execute(sent.run.id, agent)).status == "completed"

    stored = Thread.objects.get(id=thread.id)
    assert stored.private_metadata == {"cursor": SECRET}
    heads = [e["thread"] for e in published if e["type"] == "thread.updated"]
    assert heads and heads[-1]["metadata"] == {"category": "billing"}
    assert SECRET not in json.dumps(published, default=str)
    assert thread_public(stored)["metadata"] == {"category": "billing"}
    listed = [thread_public(t) for t in services.list_threads(alice).items]
    snapshot = build_snapshot(alice, thread.id)
    assert snapshot["thread"]["metadata"] == {"category": "billing"}
    assert SECRET not in json.dumps([listed, snapshot], default=str)

    # The same over HTTP, for a thread of the browser's own session.
    headers = _csrf(api_client)
    created = _json(api_client, "post", "/threads", {"title": "t"}, **headers).json()
    Thread.objects.filter(id=created["id"]).update(
        metadata={"category": "sales"}, private_metadata={"cursor": SECRET}
    )
    responses = [
        api_client.get(f"{API}/threads/{created['id']}"),
        api_client.get(f"{API}/threads"),
        api_client.get(f"{API}/threads/{created['id']}/state"),
    ]
    assert all(r.status_code == 200 for r in responses)
    assert responses[0].json()["metadata"] == {"category": "sales"}
    assert SECRET not in "".join(r.content.decode() for r in responses)


def test_ad_038_public_message_metadata_on_client_shapes_private_only_for_lifecycle(
    alice: Identity, published: list[dict[str, Any]]
) -> None:
    """AD-038: public message metadata is on every client message shape and private message
    metadata on none, while the LifecycleMessage hooks read carries both."""
    thread = services.create_thread(alice)
    sent = services.send(alice, thread.id, _message(), dispatch=False)
    assert sent.run is not None
    lifecycle_view: list[Any] = []

    async def prepare_run(input: Any) -> None:
        appended = await input.thread.messages.append(
            role="assistant",
            parts=[{"type": "text", "text": "From the knowledge base."}],
            metadata={"citations": ["doc-1"]},
            private_metadata={"reviewedBy": SECRET},
        )
        lifecycle_view.append(await input.thread.messages.get(appended.id))

    agent = define_agent(
        "ad-message-meta",
        instructions="x",
        model=ScriptedModel(steps=[ScriptedStep.reply("ok")]),
        lifecycle={"prepare_run": prepare_run},
    )
    assert asyncio.run(_execute(sent.run.id, agent)).status == "completed"

    (message,) = lifecycle_view
    assert dict(message.metadata) == {"citations": ["doc-1"]}
    assert dict(message.private_metadata) == {"reviewedBy": SECRET}
    shapes = [m for m in build_snapshot(alice, thread.id)["messages"] if m["id"] == message.id]
    shapes += [
        m.to_ui_message()
        for m in services.list_messages(alice, thread.id).items
        if m.message_id == message.id
    ]
    shapes += [
        e["message"]
        for e in published
        if e["type"] == "message.committed" and e["message"]["id"] == message.id
    ]
    assert len(shapes) == 3
    for shape in shapes:
        assert shape["metadata"]["citations"] == ["doc-1"]
        assert SECRET not in json.dumps(shape)
    assert SECRET not in json.dumps(published, default=str)
