"""Step-stream rules on the ORM store and the realtime layer: canonical deltas as published
(LC-104), transformed output after a refresh (LC-108) and in later steps (LC-109), model
context from stored rows (LC-051), provider-executed calls (LC-127), no open row after an
uncommitted step (LC-116), and realtime events of trusted and regenerate rewrites.

``realtime.delivery.publish_inline`` (where in-process publishing ends) is replaced by a
recorder where a test checks events, so it sees exactly what reaches the replay buffer and
the thread's subscribers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from pydantic import BaseModel

from pai_agents import RunEngine, ScriptedModel, ScriptedStep, ScriptedToolCall, define_agent
from pai_agents.lifecycle import AssistantResponse, HistoryRewritePatch, MetadataSchemas, Respond
from pai_agents.messages.chunks import validate_chunk
from pai_threads import services
from pai_threads.errors import RewriteRejected
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Thread
from pai_threads.realtime.publisher import RealtimePublisher
from pai_threads.store.thread_store import ORMThreadStore
from pai_threads.websocket.snapshot import build_snapshot

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "s3cret-private-value"


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []

    def record(thread_id: str, batch: Sequence[dict[str, Any]]) -> list[Any]:
        events.extend({**e, "_thread": thread_id} for e in batch)
        return list(batch)

    monkeypatch.setattr("pai_threads.realtime.delivery.publish_inline", record)
    return events


def transforming(edit: Callable[[dict[str, Any]], list[dict[str, Any]]]) -> Any:
    async def transform(input: Any) -> Any:
        async def stream() -> Any:
            async for part in input.stream:
                for out in edit(part):
                    yield out

        return stream()

    return transform


def sanitizing(part: dict[str, Any]) -> list[dict[str, Any]]:
    """Redact text and reasoning (canonical ``text``, LC-104), replace the call's input."""
    if part["type"] == "text-delta":
        return [{**part, "delta": part["delta"].replace("secret", "[redacted]")}]
    if part["type"] == "reasoning-delta":
        return [{**part, "text": part["text"].replace("secret", "[redacted]")}]
    if part["type"] == "tool-input-delta":
        return []
    if part["type"] == "tool-call":
        return [{**part, "input": {"q": "safe"}}]
    return [part]


class Args(BaseModel):
    q: str = ""


def lookup_tool() -> Any:
    from pai_agents import tool

    @tool(input=Args)
    def lookup(args: Args) -> str:
        """Look something up."""
        return f"found {args.q}"

    return lookup


SECRET_STEP = ScriptedStep(
    reasoning="the secret plan",
    text="my secret",
    chunk_size=100,
    tool_calls=[ScriptedToolCall(name="lookup", input={"q": "secret"})],
)


def _send(identity: Identity, thread: Thread | None = None) -> Run:
    thread = thread or services.create_thread(identity)
    result = services.send(
        identity,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": "hello"}]},
        dispatch=False,
    )
    assert result.run is not None
    return result.run


def _execute(
    run_id: str,
    lifecycle: Any,
    steps: Sequence[ScriptedStep],
    *,
    realtime: bool = False,
    **engine: Any,
) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(steps=list(steps))
    agent = define_agent(
        "orm-stream-rules",
        instructions="x",
        model=model,
        tools=[lookup_tool()],
        lifecycle=lifecycle,
    )

    async def execute() -> Any:
        store = ORMThreadStore()
        claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
        if not realtime:
            return await RunEngine(agent=agent, store=store, **engine).run_episode(claim)
        sink = RealtimePublisher(claim.thread_id, coalesce_ms=0)
        try:
            return await RunEngine(agent=agent, store=store, sink=sink, **engine).run_episode(claim)
        finally:
            await sink.aclose()

    return asyncio.run(execute()), model


def _assistant(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "assistant"]


def _texts(message: dict[str, Any], kind: str = "text") -> list[str]:
    return [p["text"] for p in message["parts"] if p["type"] == kind]


# -- LC-104, LC-108, LC-109 -------------------------------------------------------------


def test_lc_104_published_reasoning_chunks_carry_the_transformed_fragment(
    alice: Identity, published: list[dict[str, Any]]
) -> None:
    """LC-104, LC-106: a hook edits the canonical ``reasoning-delta.text``; the realtime
    layer publishes native chunks (``reasoning-delta.delta``, ``tool-input-delta
    .inputTextDelta``), each valid for the SDK's chunk schema, carrying the edit."""
    seen: list[dict[str, Any]] = []

    def observe(part: dict[str, Any]) -> list[dict[str, Any]]:
        seen.append(dict(part))
        if part["type"] == "reasoning-delta":
            return [{**part, "text": part["text"].upper()}]
        return [part]

    step = ScriptedStep(
        reasoning="think it over",
        text="ok",
        tool_calls=[ScriptedToolCall(name="lookup", input={"q": "x"})],
    )
    run = _send(alice)
    outcome, _ = _execute(
        run.id,
        {"transform_step_stream": transforming(observe)},
        [step, ScriptedStep.reply("done")],
        realtime=True,
    )
    assert outcome.status == "completed"
    assert all("text" in p for p in seen if p["type"] == "reasoning-delta")
    assert all("delta" in p for p in seen if p["type"] == "tool-input-delta")
    chunks = [e["chunk"] for e in published if e["type"] == "generation.message.chunk"]
    for chunk in chunks:
        validate_chunk(chunk)
    reasoning = [c for c in chunks if c["type"] == "reasoning-delta"]
    assert reasoning and all("text" not in c for c in reasoning)
    assert "".join(c["delta"] for c in reasoning) == "THINK IT OVER"
    typed = "".join(c["inputTextDelta"] for c in chunks if c["type"] == "tool-input-delta")
    assert json.loads(typed) == {"q": "x"}


def test_lc_108_transformed_output_survives_a_refresh(api_client: Client) -> None:
    """LC-108: after the run, a client refresh (the websocket snapshot, the HTTP messages
    endpoint) shows the message as transform_step_stream made it: redacted text and
    reasoning, the replaced tool input and its result, the ui_data part it wrote."""

    class Progress(BaseModel):
        percent: int

    async def transform(input: Any) -> Any:
        input.ui_data.write({"type": "data-progress", "id": "p", "data": {"percent": 100}})
        return await transforming(sanitizing)(input)

    created = api_client.post(
        "/api/pai/threads", data=json.dumps({}), content_type="application/json"
    )
    assert created.status_code == 201, created.content
    thread = Thread.objects.get(id=created.json()["id"])
    identity = Identity(scope_key=thread.scope_key, data={"anonymous": True})
    run = _send(identity, thread)
    model = ScriptedModel(steps=[SECRET_STEP, ScriptedStep.reply("done")])
    agent = define_agent(
        "orm-stream-rules",
        instructions="x",
        model=model,
        tools=[lookup_tool()],
        lifecycle={"transform_step_stream": transform},
        ui_data_schemas={"progress": Progress},
    )

    async def execute() -> Any:
        store = ORMThreadStore()
        claim = await store.claim_run(run.id, owner="w1", lease_seconds=30)
        return await RunEngine(agent=agent, store=store, checkpoint_seconds=0).run_episode(claim)

    assert asyncio.run(execute()).status == "completed"
    snapshot = build_snapshot(identity, thread.id)["messages"]
    response = api_client.get(f"/api/pai/threads/{thread.id}/messages")
    assert response.status_code == 200, response.content
    for messages in (snapshot, response.json()["messages"]):
        assert "secret" not in json.dumps(messages)
        first = _assistant(messages)[0]
        assert _texts(first) == ["my [redacted]"]
        assert _texts(first, "reasoning") == ["the [redacted] plan"]
        [call] = [p for p in first["parts"] if p.get("toolCallId")]
        assert (call["input"], call["output"]) == ({"q": "safe"}, "found safe")
        assert {"type": "data-progress", "id": "p", "data": {"percent": 100}} in first["parts"]
        assert first["metadata"]["pai"]["status"] == "committed"


def test_lc_109_later_steps_see_the_transformed_message_on_the_orm(alice: Identity) -> None:
    """LC-109: the second model step's request (from the stored rows) holds the transformed
    message, and nothing of the original output."""
    run = _send(alice)
    outcome, model = _execute(
        run.id,
        {"transform_step_stream": transforming(sanitizing)},
        [SECRET_STEP, ScriptedStep.reply("done")],
    )
    assert outcome.status == "completed"
    second = model.requests[1]
    assert "secret" not in json.dumps(second.messages)
    [assistant] = [m for m in second.messages if m["role"] == "assistant"]
    assert {"type": "reasoning", "text": "the [redacted] plan"} in assistant["content"]
    assert {"type": "text", "text": "my [redacted]"} in assistant["content"]
    [call] = [c for c in assistant["content"] if c["type"] == "tool-call"]
    assert call["input"] == {"q": "safe"}


# -- LC-051 -----------------------------------------------------------------------------


def test_lc_051_model_context_comes_from_stored_rows_not_projections(alice: Identity) -> None:
    """LC-051: hooks mutating the LifecycleMessage projections they read (prepare_run,
    resolve_model_context) change nothing the model sees; private message metadata never
    reaches the request."""

    def tamper(message: Any) -> None:
        for part in message.parts:
            if part.get("type") == "text":
                part["text"] = "tampered"

    async def prepare_run(input: Any) -> None:
        await input.thread.messages.append(
            role="user",
            parts=[{"type": "text", "text": "context note"}],
            private_metadata={"audit": SECRET},
        )
        tamper(input.latest_user_message)
        for message in (await input.thread.messages.list(view="all")).items:
            tamper(message)

    async def resolve(input: Any, next: Any) -> Any:
        for message in await input.history.collect():
            tamper(message)
        return await next()

    run = _send(alice)
    outcome, model = _execute(
        run.id,
        [{"prepare_run": prepare_run}, {"resolve_model_context": resolve}],
        [ScriptedStep.reply("ok")],
    )
    assert outcome.status == "completed"
    sent = json.dumps(model.requests[0].messages)
    assert "tampered" not in sent and SECRET not in sent
    assert "hello" in sent and "context note" in sent
    assert Message.objects.get(thread_id=run.thread_id, role="user", relation="input").parts == [
        {"type": "text", "text": "hello"}
    ]


# -- LC-127 -----------------------------------------------------------------------------


def test_lc_127_provider_executed_calls_are_stored_and_never_executed(alice: Identity) -> None:
    """LC-127: on the ORM a valid provider-executed call is stored with its result, an
    invalid one (a name the runtime owns) as an error whose result is ignored; neither is
    executed or made a pending action, and the run does not wait."""
    step = ScriptedStep(
        tool_calls=[
            ScriptedToolCall(
                name="web_search",
                input={"q": "pai"},
                provider_executed=True,
                dynamic=True,
                result={"hits": 2},
            ),
            ScriptedToolCall(
                name="lookup", input={"q": "x"}, provider_executed=True, result="forged"
            ),
        ]
    )
    run = _send(alice)
    outcome, model = _execute(
        run.id, {"transform_step_stream": transforming(lambda p: [p])}, [step]
    )
    assert outcome.status == "completed" and len(model.requests) == 1
    snapshot = build_snapshot(alice, run.thread_id)
    search, owned = [p for p in _assistant(snapshot["messages"])[0]["parts"] if p.get("toolCallId")]
    assert (search["state"], search["output"], search["providerExecuted"]) == (
        "output-available",
        {"hits": 2},
        True,
    )
    assert (owned["state"], "output" in owned, owned["providerExecuted"]) == (
        "output-error",
        False,
        True,
    )
    assert snapshot["pendingActions"] == []


# -- LC-116: no open row after an uncommitted step --------------------------------------


def aborting(**options: Any) -> Any:
    async def transform(input: Any) -> Any:
        async def stream() -> Any:
            async for part in input.stream:
                if part["type"] == "text-delta" and "forb" in part["delta"]:
                    await input.abort("leak", **options)
                yield part

        return stream()

    return transform


def _rows(run: Run) -> list[tuple[str, str]]:
    return list(
        Message.objects.filter(run_id=run.id, role="assistant").values_list("message_id", "status")
    )


def test_lc_116_an_abort_after_a_checkpoint_leaves_no_open_row(alice: Identity) -> None:
    """LC-116: a policy abort without replacement after the engine checkpointed the step
    deletes the open row with the run's end: a refresh shows no partial message."""
    run = _send(alice)
    outcome, _ = _execute(
        run.id,
        {"transform_step_stream": aborting()},
        [ScriptedStep.reply("ok then forbidden", chunk_size=4)],
        checkpoint_seconds=0,
    )
    assert outcome.status == "blocked"
    assert _rows(run) == []
    assert Run.objects.get(id=run.id).status == Run.Status.BLOCKED
    assert [m["role"] for m in build_snapshot(alice, run.thread_id)["messages"]] == ["user"]


def test_lc_117_a_replacement_after_a_checkpoint_commits_in_place(alice: Identity) -> None:
    """LC-117: the replacement replaces the open checkpoint row (same message id)."""
    run = _send(alice)
    outcome, _ = _execute(
        run.id,
        {"transform_step_stream": aborting(replacement="I can't share that.")},
        [ScriptedStep.reply("ok then forbidden", chunk_size=4)],
        checkpoint_seconds=0,
    )
    assert outcome.status == "blocked"
    [(message_id, status)] = _rows(run)
    assert status == Message.Status.COMMITTED
    assert Message.objects.get(message_id=message_id).parts[-1]["text"] == "I can't share that."


def test_lc_080_a_response_replaces_a_dead_attempts_open_row(alice: Identity) -> None:
    """LC-080, LC-116: when recovery repeats a step a dead worker left open and
    prepare_model_step responds, the response is committed in place of that open row."""
    run = _send(alice)
    store = ORMThreadStore()

    async def crash() -> None:
        claim = await store.claim_run(run.id, owner="dead", lease_seconds=30)
        partial = {"id": "msg_dead", "role": "assistant", "parts": [{"type": "text", "text": "h"}]}
        await store.checkpoint_message(claim.lease, message=partial, step_index=0)

    asyncio.run(crash())
    Run.objects.filter(id=run.id).update(lease_expires_at=timezone.now())
    response = Respond(response=AssistantResponse(text="safe answer"))
    outcome, _ = _execute(run.id, {"prepare_model_step": lambda i: response}, [])
    assert outcome.status == "completed"
    assert _rows(run) == [("msg_dead", Message.Status.COMMITTED)]


# -- realtime events of trusted and regenerate rewrites ---------------------------------


class Private(BaseModel):
    secret: str = ""


class Public(BaseModel):
    title: str = "untitled"


@pytest.fixture
def rewriter(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A registered agent whose prepare_history_rewrite returns ``state["patch"]``."""
    state: dict[str, Any] = {"patch": None}

    def prepare(input: Any) -> Any:
        if isinstance(state["patch"], Exception):
            raise state["patch"]
        return state["patch"]

    agent = define_agent(
        "rewrite-events",
        instructions="x",
        model=ScriptedModel(steps=[]),
        lifecycle={"prepare_history_rewrite": prepare},
        thread_metadata=MetadataSchemas(private=Private, public=Public),
        on_runtime_error=lambda report: None,
    )
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)
    return state


def _conversation(identity: Identity, roles: Sequence[str]) -> Thread:
    thread = services.create_thread(identity, agent="rewrite-events")
    for index, role in enumerate(roles):
        Message.objects.create(
            message_id=f"m{index}",
            thread=thread,
            scope_key=thread.scope_key,
            role=role,
            parts=[{"type": "text", "text": f"{role} {index}"}],
            producer=Message.Producer.SEND if role == "user" else Message.Producer.MODEL,
        )
    return thread


def _heads(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "thread.updated"]


def test_lc_029_lc_030_regenerate_publishes_the_public_head_after_commit(
    alice: Identity, rewriter: dict[str, Any], published: list[dict[str, Any]]
) -> None:
    """LC-029, LC-030, LC-066: a committed regenerate rewrite (answers hidden, hook
    patches) publishes the public thread head; private thread metadata is in no payload."""
    thread = _conversation(alice, ("user", "assistant"))
    rewriter["patch"] = HistoryRewritePatch(
        private_metadata={"secret": SECRET}, metadata={"title": "regenerated"}
    )
    services.regenerate(alice, thread.id, dispatch=False)
    [head] = _heads(published)
    assert head["_thread"] == head["threadId"] == thread.id
    assert head["thread"]["metadata"] == {"title": "regenerated"}
    assert "privateMetadata" not in head["thread"]
    assert SECRET not in json.dumps(published)


def test_lc_029_lc_030_trusted_visibility_rewrite_publishes_the_public_head(
    alice: Identity, rewriter: dict[str, Any], published: list[dict[str, Any]]
) -> None:
    """LC-029, LC-030, LC-066: a committed trusted visibility rewrite publishes the public
    head, even when its hook changed only private metadata (visibility changed); a
    rewrite that changes nothing publishes nothing."""
    thread = _conversation(alice, ("user", "assistant"))
    rewriter["patch"] = HistoryRewritePatch(private_metadata={"secret": SECRET})
    services.update_visibility(alice, thread.id, {"m1": {"transcript": False}})
    [head] = _heads(published)
    assert head["thread"]["metadata"] == {"title": "untitled"}
    assert SECRET not in json.dumps(published)
    published.clear()
    assert services.update_visibility(alice, thread.id, {"m1": {"transcript": False}}) is None
    assert published == []


def test_lc_031_rewrites_that_change_only_private_facts_or_roll_back_publish_nothing(
    alice: Identity, rewriter: dict[str, Any], published: list[dict[str, Any]]
) -> None:
    """LC-031, LC-029: a regenerate that hides nothing and patches only private metadata
    publishes no head; a rejected (rolled back) rewrite publishes nothing."""
    thread = _conversation(alice, ("user",))
    rewriter["patch"] = HistoryRewritePatch(private_metadata={"secret": SECRET})
    services.regenerate(alice, thread.id, dispatch=False)
    # The regenerate announces its run (run.status, queue, actions), but no thread head.
    assert [e["type"] for e in published] == ["run.status", "queue.changed", "actions.changed"]
    published.clear()
    Run.objects.filter(thread=thread).update(status=Run.Status.COMPLETED)
    rewriter["patch"] = RuntimeError("hook broke")
    with pytest.raises(RewriteRejected):
        services.regenerate(alice, thread.id, dispatch=False)
    with pytest.raises(RewriteRejected):
        services.update_visibility(alice, thread.id, {"m0": {"context": False}})
    assert published == []
