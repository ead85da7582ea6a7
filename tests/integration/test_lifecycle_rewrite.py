"""History rewrite hooks on the ORM: regenerate and trusted visibility rewrites (LC-057..066)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from pydantic import BaseModel

from pai_agents import ScriptedModel, define_agent
from pai_agents.engine.rewrites import dispatcher
from pai_agents.lifecycle import HistoryRewritePatch, MetadataSchemas
from pai_agents.lifecycle.metadata import InvalidMetadata
from pai_threads import services
from pai_threads.errors import InvalidInput, NotFound, RewriteRejected, ThreadBusy
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, Thread


class Cursor(BaseModel):
    cursor: list[str] = []
    rewrites: int = 0


class Public(BaseModel):
    title: str = "untitled"


class Hooks:
    def __init__(self) -> None:
        self.prepared: list[Any] = []
        self.rewritten: list[Any] = []
        self.reports: list[Any] = []
        self.prepare_result: Any = None
        self.rewritten_error: Exception | None = None

    def prepare_history_rewrite(self, input: Any) -> Any:
        self.prepared.append(input)
        if isinstance(self.prepare_result, Exception):
            raise self.prepare_result
        if self.prepare_result is not None:
            return self.prepare_result
        ids = (
            input.rewrite.retained_message_ids
            if input.rewrite.kind == "regenerate"
            else tuple(c.message_id for c in input.rewrite.changes)
        )
        return HistoryRewritePatch(
            private_metadata={
                "cursor": list(ids),
                "rewrites": input.private_metadata["rewrites"] + 1,
            },
            metadata={"title": f"v{input.version}"},
        )

    def history_rewritten(self, input: Any) -> None:
        thread = Thread.objects.get(id=input.thread_id)
        self.rewritten.append((input, thread.version, input.signal.aborted))
        if self.rewritten_error is not None:
            raise self.rewritten_error


@pytest.fixture
def hooks(monkeypatch: pytest.MonkeyPatch) -> Hooks:
    recorder = Hooks()
    agent = define_agent(
        "rewriter",
        instructions="x",
        model=ScriptedModel(steps=[]),
        lifecycle={
            "prepare_history_rewrite": recorder.prepare_history_rewrite,
            "history_rewritten": recorder.history_rewritten,
        },
        thread_metadata=MetadataSchemas(private=Cursor, public=Public),
        on_runtime_error=recorder.reports.append,
    )
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)
    return recorder


pytestmark = pytest.mark.django_db(transaction=True)


def _conversation(identity: Identity) -> tuple[Thread, list[str]]:
    """user, assistant, user, assistant: the second answer is what regenerate removes."""
    thread = services.create_thread(identity, agent="rewriter")
    ids = []
    for index, role in enumerate(("user", "assistant", "user", "assistant")):
        row = Message.objects.create(
            message_id=f"m{index}",
            thread=thread,
            scope_key=thread.scope_key,
            role=role,
            parts=[{"type": "text", "text": f"{role} {index}"}],
            producer=Message.Producer.SEND if role == "user" else Message.Producer.MODEL,
        )
        ids.append(row.message_id)
    return thread, ids


def _visible(thread: Thread) -> list[str]:
    return list(
        Message.objects.filter(thread=thread, in_transcript=True)
        .order_by("id")
        .values_list("message_id", flat=True)
    )


def test_lc_057_lc_058_lc_060_regenerate_commits_hook_patches_with_the_rewrite(
    alice: Identity, hooks: Hooks
) -> None:
    thread, _ids = _conversation(alice)
    assert thread.private_metadata == {"cursor": [], "rewrites": 0}  # parsed {} (AD-031)
    before = Thread.objects.get(id=thread.id).version
    run = services.regenerate(alice, thread.id, dispatch=False)
    (input,) = hooks.prepared
    rewrite = input.rewrite
    assert rewrite.kind == "regenerate" and rewrite.target_message_id == "m2"
    assert rewrite.retained_message_ids == ("m0", "m1", "m2")
    assert rewrite.removed_message_ids == ("m3",)
    assert rewrite.before_version == input.version == before
    assert input.private_metadata == {"cursor": [], "rewrites": 0}
    assert input.metadata == {"title": "untitled"}
    stored = Thread.objects.get(id=thread.id)
    assert stored.version == before + 1
    assert stored.private_metadata == {"cursor": ["m0", "m1", "m2"], "rewrites": 1}
    assert stored.metadata == {"title": f"v{before}"}
    assert _visible(thread) == ["m0", "m1", "m2"]
    assert Run.objects.get(id=run.id).initiator == Run.Initiator.REGENERATE


@pytest.mark.parametrize(
    "failure",
    [RuntimeError("hook broke"), HistoryRewritePatch(private_metadata={"rewrites": "x"})],
)
def test_lc_057_both_or_neither_when_the_hook_or_its_patch_fails(
    alice: Identity, hooks: Hooks, failure: Any
) -> None:
    thread, ids = _conversation(alice)
    version = Thread.objects.get(id=thread.id).version
    hooks.prepare_result = failure
    with pytest.raises(RewriteRejected) as raised:
        services.regenerate(alice, thread.id, dispatch=False)
    cause = RuntimeError if isinstance(failure, Exception) else InvalidMetadata
    assert isinstance(raised.value.__cause__, cause)
    assert raised.value.message == "The history rewrite was rejected."  # detail stays private
    [report] = hooks.reports
    assert report.phase == "prepare_history_rewrite" and report.error is raised.value.__cause__
    stored = Thread.objects.get(id=thread.id)
    assert stored.version == version
    assert stored.private_metadata == {"cursor": [], "rewrites": 0}
    assert _visible(thread) == ids
    assert not Run.objects.filter(thread=thread).exists()  # no regenerate run either


def test_lc_062_lc_064_history_rewritten_runs_after_commit_with_after_version(
    alice: Identity, hooks: Hooks
) -> None:
    thread, _ = _conversation(alice)
    services.regenerate(alice, thread.id, dispatch=False)
    assert dispatcher().wait_idle()
    ((input, committed_version, aborted),) = hooks.rewritten
    assert input.rewrite.after_version == input.rewrite.before_version + 1 == committed_version
    assert aborted is False


def test_lc_063_a_failing_history_rewritten_is_reported_and_keeps_the_rewrite(
    alice: Identity, hooks: Hooks
) -> None:
    thread, _ = _conversation(alice)
    hooks.rewritten_error = RuntimeError("outbox down")
    run = services.regenerate(alice, thread.id, dispatch=False)
    assert dispatcher().wait_idle()
    (report,) = hooks.reports
    assert report.phase == "history_rewritten" and report.run_id == run.id
    assert str(report.error) == "outbox down"
    assert _visible(thread) == ["m0", "m1", "m2"]
    assert Thread.objects.get(id=thread.id).private_metadata["rewrites"] == 1


def test_lc_050_regenerate_is_refused_while_a_run_holds_the_lease(
    alice: Identity, hooks: Hooks
) -> None:
    thread, ids = _conversation(alice)
    Run.objects.create(
        thread=thread,
        scope_key=thread.scope_key,
        agent_name="rewriter",
        status=Run.Status.RUNNING,
        lease_owner="w1",
        lease_expires_at=timezone.now(),
    )
    with pytest.raises(ThreadBusy):
        services.regenerate(alice, thread.id, dispatch=False)
    with pytest.raises(ThreadBusy):
        services.update_visibility(alice, thread.id, {"m1": {"context": False}})
    assert hooks.prepared == [] and _visible(thread) == ids


def test_lc_059_lc_066_trusted_visibility_rewrite_fires_the_visibility_variant(
    alice: Identity, hooks: Hooks
) -> None:
    thread, _ = _conversation(alice)
    version = Thread.objects.get(id=thread.id).version
    done = services.update_visibility(
        alice, thread.id, {"m1": {"context": False}, "m0": {"transcript": True}}
    )
    assert done is not None and done.after_version == version + 1
    (input,) = hooks.prepared  # exactly once under the thread lock (LC-061)
    (change,) = input.rewrite.changes  # m0 did not change: no entry
    assert input.rewrite.kind == "visibility" and change.message_id == "m1"
    assert (change.before.transcript, change.before.context) == (True, True)
    assert (change.after.transcript, change.after.context) == (True, False)
    row = Message.objects.get(thread=thread, message_id="m1")
    assert (row.in_transcript, row.in_context) == (True, False)
    stored = Thread.objects.get(id=thread.id)
    assert stored.version == version + 1
    assert stored.private_metadata == {"cursor": ["m1"], "rewrites": 1}
    assert dispatcher().wait_idle()
    assert [r[0].rewrite.kind for r in hooks.rewritten] == ["visibility"]
    # nothing to change: no hook, no version bump
    assert services.update_visibility(alice, thread.id, {"m1": {"context": False}}) is None
    assert len(hooks.prepared) == 1


def test_lc_059_visibility_rewrite_input_errors_and_scoping(
    alice: Identity, bob: Identity, hooks: Hooks
) -> None:
    thread, _ = _conversation(alice)
    with pytest.raises(NotFound):
        services.update_visibility(alice, thread.id, {"nope": {"context": False}})
    with pytest.raises(InvalidInput):
        services.update_visibility(alice, thread.id, {"m1": {"hidden": True}})
    with pytest.raises(NotFound):
        services.update_visibility(bob, thread.id, {"m1": {"context": False}})
    assert hooks.prepared == []


def test_lc_057_lc_158_a_rejected_rewrite_is_a_typed_http_error(
    api_client: Client, hooks: Hooks
) -> None:
    """LC-057, LC-158: a failing prepare_history_rewrite reaches the HTTP caller of
    regenerate as a typed 409 ``rewrite_rejected`` with a generic message; the detail goes
    to on_runtime_error only, and nothing changes."""
    created = api_client.post(
        "/api/pai/threads",
        data=json.dumps({"agent": "rewriter"}),
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    thread = Thread.objects.get(id=created.json()["id"])
    for index, role in enumerate(("user", "assistant")):
        Message.objects.create(
            message_id=f"m{index}",
            thread=thread,
            scope_key=thread.scope_key,
            role=role,
            parts=[{"type": "text", "text": f"{role} {index}"}],
            producer=Message.Producer.SEND if role == "user" else Message.Producer.MODEL,
        )
    version = Thread.objects.get(id=thread.id).version
    hooks.prepare_result = RuntimeError("secret internal detail 42")
    api_client.get("/")
    token = api_client.cookies.get("csrftoken")
    headers = {"HTTP_X_CSRFTOKEN": token.value} if token else {}
    response = api_client.post(f"/api/pai/threads/{thread.id}/regenerate", **headers)
    assert response.status_code == 409, response.content
    body = response.json()
    assert body["error"] == {
        "code": "rewrite_rejected",
        "message": "The history rewrite was rejected.",
    }
    assert "secret" not in response.content.decode()
    [report] = hooks.reports
    assert report.phase == "prepare_history_rewrite"
    assert str(report.error) == "secret internal detail 42"
    assert report.thread_id == thread.id
    stored = Thread.objects.get(id=thread.id)
    assert stored.version == version
    assert _visible(thread) == ["m0", "m1"]
    assert not Run.objects.filter(thread=thread).exists()


def _run_with_prepare(identity: Identity, thread: Thread, prepare_run: Any) -> Any:
    import asyncio

    from pai_agents import RunEngine, ScriptedStep
    from pai_threads.store.thread_store import ORMThreadStore

    result = services.send(
        identity,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": "again"}]},
        dispatch=False,
    )

    async def execute() -> Any:
        store = ORMThreadStore()
        agent = define_agent(
            "episode",
            instructions="x",
            model=ScriptedModel(steps=[ScriptedStep.reply("ok")]),
            lifecycle={"prepare_run": prepare_run},
        )
        claim = await store.claim_run(result.run.id, owner="w1", lease_seconds=30)
        return await RunEngine(agent=agent, store=store).run_episode(claim)

    return asyncio.run(execute())


def test_lc_066_lifecycle_visibility_writes_fire_the_visibility_rewrite_hooks(
    alice: Identity, hooks: Hooks
) -> None:
    """LC-066 (second half): ``thread.messages.update_visibility`` from lifecycle code runs
    ``prepare_history_rewrite`` (kind ``visibility``) inside the write's transaction, its
    patches commit with the write, and ``history_rewritten`` follows the commit; a write
    that changes nothing fires no hook."""
    thread, _ids = _conversation(alice)

    async def prepare_run(input: Any) -> None:
        await input.thread.messages.update_visibility(["m1"], transcript=False)
        await input.thread.messages.update_visibility(["m1"], transcript=False)  # no change

    before = Thread.objects.get(id=thread.id).version
    assert _run_with_prepare(alice, thread, prepare_run).status == "completed"
    (input,) = hooks.prepared
    assert input.rewrite.kind == "visibility"
    (change,) = input.rewrite.changes
    assert change.message_id == "m1"
    assert (change.before.transcript, change.after.transcript) == (True, False)
    assert change.after.context is True
    stored = Thread.objects.get(id=thread.id)
    assert stored.private_metadata == {"cursor": ["m1"], "rewrites": 1}
    assert stored.metadata["title"] == f"v{input.version}"
    assert "m1" not in _visible(thread)
    assert dispatcher().wait_idle()
    ((fact, seen_version, _aborted),) = hooks.rewritten
    assert fact.rewrite.kind == "visibility"
    assert input.version >= before
    assert fact.rewrite.after_version == input.version + 1 <= seen_version  # after the commit


def test_lc_066_a_raising_rewrite_hook_rejects_the_lifecycle_visibility_write(
    alice: Identity, hooks: Hooks
) -> None:
    """LC-066, LC-057: a raising prepare_history_rewrite rejects the facade visibility
    write (RewriteRejected to the hook, reported to on_runtime_error), nothing is stored."""
    thread, _ids = _conversation(alice)
    hooks.prepare_result = RuntimeError("no")
    rejected: list[Exception] = []

    async def prepare_run(input: Any) -> None:
        try:
            await input.thread.messages.update_visibility(["m1"], transcript=False)
        except RewriteRejected as exc:
            rejected.append(exc)

    assert _run_with_prepare(alice, thread, prepare_run).status == "completed"
    assert len(rejected) == 1
    assert "m1" in _visible(thread)
    assert Thread.objects.get(id=thread.id).private_metadata == {"cursor": [], "rewrites": 0}
    assert [r.phase for r in hooks.reports] == ["prepare_history_rewrite"]
    assert dispatcher().wait_idle()
    assert hooks.rewritten == []
