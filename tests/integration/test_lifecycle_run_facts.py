"""Run facts and lazy reads of hook inputs on the ORM store (LC-007, LC-008, LC-020)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from pydantic import BaseModel

from pai_agents import RunEngine, ScriptedModel, ScriptedStep, define_agent, tool
from pai_agents.lifecycle import Complete
from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Run
from pai_threads.store import thread_store as store_module
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)


class Args(BaseModel):
    q: str = ""


@tool(input=Args, needs_approval=True)
def transfer(args: Args) -> str:
    """Needs a person's approval."""
    return f"sent {args.q}"


@tool(input=Args)
def lookup(args: Args) -> str:
    """Look something up."""
    return f"found {args.q}"


def _send(identity: Identity, text: str = "hello") -> services.SendResult:
    thread = services.create_thread(identity)
    return services.send(
        identity,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": text}]},
        dispatch=False,
    )


async def _execute(run_id: str, agent: Any) -> Any:
    store = ORMThreadStore()
    claim = await store.claim_run(run_id, owner="w1", lease_seconds=30)
    return await RunEngine(agent=agent, store=store).run_episode(claim)


def test_lc_007_lc_008_run_started_at_survives_approval_and_resume(alice: Identity) -> None:
    """LC-007: prepare_run and prepare_model_step see the same run.started_at (the stored
    Run.started_at, set by the first claim) before waiting and after the approved resume.
    LC-008: execution.started_at is the episode's: the run's start first, later after
    the resume (operation ``resume``)."""
    seen: list[tuple[str, Any]] = []
    agent = define_agent(
        "orm-facts",
        instructions="x",
        model=ScriptedModel(
            steps=[ScriptedStep.call("transfer", {"q": "5"}, id="t1"), ScriptedStep.reply("ok")]
        ),
        tools=[transfer],
        lifecycle={
            "prepare_run": lambda i: seen.append(("prepare_run", i.run)),
            "prepare_model_step": lambda i: seen.append(("prepare_model_step", i.run)),
        },
    )
    sent = _send(alice)
    assert asyncio.run(_execute(sent.run.id, agent)).status == "waiting"
    first_episode = len(seen)
    stored = Run.objects.get(id=sent.run.id).started_at
    time.sleep(0.002)
    action = PendingAction.objects.get(run_id=sent.run.id)
    services.submit_action(alice, action.id, {"approved": True}, dispatch=False)
    assert asyncio.run(_execute(sent.run.id, agent)).status == "completed"

    assert [phase for phase, _ in seen] == ["prepare_run", "prepare_model_step"] * 2
    before, after = [r for _, r in seen[:first_episode]], [r for _, r in seen[first_episode:]]
    run = Run.objects.get(id=sent.run.id)
    assert run.started_at == stored and run.attempt == 2
    assert {r.started_at for r in before + after} == {stored.isoformat()}
    assert {(r.execution.operation, r.execution.started_at) for r in before} == {
        ("send", stored.isoformat())
    }
    assert {r.execution.operation for r in after} == {"resume"}
    (resumed_at,) = {r.execution.started_at for r in after}
    assert resumed_at > stored.isoformat()


def _message_selects(queries: list[dict[str, Any]]) -> list[str]:
    table = re.escape(Message._meta.db_table)
    pattern = re.compile(rf'^\s*SELECT\b.*\b(FROM|JOIN)\s+"?{table}"?', re.IGNORECASE | re.DOTALL)
    return [q["sql"] for q in queries if pattern.search(q["sql"])]


@pytest.fixture
def queries(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every query the store's database calls make (each runs on a worker thread's
    connection, so each call is wrapped in its own ``CaptureQueriesContext``)."""
    log: list[dict[str, Any]] = []
    original = store_module._db

    async def captured(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        def run() -> Any:
            with CaptureQueriesContext(connection) as context:
                try:
                    return fn(*args, **kwargs)
                finally:
                    log.extend(context.captured_queries)

        return await original(run)

    monkeypatch.setattr("pai_threads.store.thread_store._db", captured)
    monkeypatch.setattr("pai_threads.store.lifecycle_backend._db", captured)
    return log


def _agent(lifecycle: Any, steps: list[ScriptedStep] | None = None) -> Any:
    return define_agent(
        "orm-lazy",
        instructions="x",
        model=ScriptedModel(steps=steps or [ScriptedStep.reply("ok")]),
        tools=[transfer, lookup],
        lifecycle=lifecycle,
    )


def test_lc_020_building_hook_inputs_loads_no_messages(
    alice: Identity, queries: list[dict[str, Any]]
) -> None:
    """LC-020: a triggered run whose prepare_run reads nothing makes no query on the
    message table (the facade, run metadata clients and the input are built without I/O);
    the same hook calling ``thread.messages.list()`` does query it."""
    reads: list[Any] = []

    async def reading(input: Any) -> Any:
        reads.append(await input.thread.messages.list(view="all"))
        return Complete()

    thread = services.create_thread(alice)
    for lifecycle, expect_reads in (
        ({"prepare_run": lambda i: Complete()}, False),
        ({"prepare_run": reading}, True),
    ):
        run = services.trigger(alice, thread.id, dispatch=False)
        queries.clear()
        assert asyncio.run(_execute(run.id, _agent(lifecycle))).status == "completed"
        assert queries  # the episode's own store calls were captured
        assert bool(_message_selects(queries)) is expect_reads
    assert len(reads) == 1


def test_lc_020_prepare_run_reads_only_the_operation_input(
    alice: Identity, queries: list[dict[str, Any]]
) -> None:
    """LC-020, LC-069: for a send, building prepare_run's input reads one message (the
    operation's own user message), never a history page."""
    seen: list[Any] = []
    sent = _send(alice)
    queries.clear()
    lifecycle = {"prepare_run": lambda i: seen.append(i.latest_user_message) or Complete()}
    assert asyncio.run(_execute(sent.run.id, _agent(lifecycle))).status == "completed"
    [select] = _message_selects(queries)
    limit = re.search(r"\bLIMIT (\d+)", select)
    assert limit is not None and int(limit.group(1)) <= 2  # one row (+1 to see if more follow)
    assert sent.message is not None and seen[0].id == sent.message.message_id


def test_lc_020_step_hook_inputs_add_no_message_reads(
    alice: Identity, queries: list[dict[str, Any]]
) -> None:
    """LC-020: prepare_model_step, after_step and tool hooks that do not read add no message
    query to an episode: it makes exactly the engine's own context reads."""
    steps = [ScriptedStep.call("lookup", {"q": "a"}), ScriptedStep.reply("ok")]
    counts = []
    for lifecycle in (
        {"run_finished": lambda i: None},
        {
            "prepare_model_step": lambda i: None,
            "after_step": lambda i: None,
            "before_tool_call": lambda i: None,
            "after_tool_result": lambda i: None,
        },
    ):
        sent = _send(alice)
        queries.clear()
        assert asyncio.run(_execute(sent.run.id, _agent(lifecycle, steps))).status == "completed"
        counts.append(len(_message_selects(queries)))
    assert counts[0] == counts[1] >= 1
