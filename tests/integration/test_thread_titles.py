"""Automatic thread titles on the real database (AD-041..AD-049): scheduled after completed
runs only, stored as title records (``title_source``, counters), shown in the thread head and
the thread list, published as ``thread.updated``, and never replacing a manual rename unless
``overwrite="always"``."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from pai_agents import (
    AbortSignal,
    ModelRequest,
    ModelSelection,
    ScriptedModel,
    ScriptedStep,
    ThreadTitleInput,
    ThreadTitles,
    define_agent,
)
from pai_agents.titles import DEFAULT_TITLE_INSTRUCTIONS
from pai_threads import services
from pai_threads.execution import registry, titles
from pai_threads.execution.execute import aexecute_run
from pai_threads.executors.celery import CeleryExecutor
from pai_threads.identity import Identity
from pai_threads.models import Run, Thread
from pai_threads.websocket.snapshot import build_snapshot, thread_public

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"
TITLE = "Weekend in Lisbon"


class _Executor:
    """Records title jobs instead of running them, so each test runs them when it wants."""

    def __init__(self) -> None:
        self.titles: list[tuple[str, str]] = []

    def dispatch(self, run_id: str) -> None:
        raise AssertionError("runs execute inline in these tests")

    def dispatch_title(self, thread_id: str, run_id: str) -> None:
        self.titles.append((thread_id, run_id))


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch) -> _Executor:
    fake = _Executor()
    monkeypatch.setattr(titles, "get_executor", lambda: fake)
    return fake


@pytest.fixture
def register(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any], Any]:
    def add(agent: Any) -> Any:
        agents = {**registry.agents(), agent.name: agent}
        monkeypatch.setattr(registry, "agents", lambda: agents)
        return agent

    return add


def _respond(request: ModelRequest) -> ScriptedStep:
    """Main steps answer; a default title call (recognized by its prompt) names the chat."""
    if request.system == DEFAULT_TITLE_INSTRUCTIONS:
        return ScriptedStep.reply(f'"{TITLE}."')
    return ScriptedStep.reply("Happy to help.")


def _agent(
    thread_titles: Any,
    *,
    name: str = "titled",
    respond: Callable[[ModelRequest], ScriptedStep] = _respond,
) -> Any:
    """A scripted agent whose main runs carry settings and provider options (AD-046)."""
    model = ScriptedModel(respond=respond)
    selection = ModelSelection(
        model=model, settings={"temperature": 0.3}, provider_options={"openai": {"store": False}}
    )
    return define_agent(
        name, instructions="Help.", model=lambda b: selection, thread_titles=thread_titles
    )


def _model(agent: Any) -> ScriptedModel:
    return agent.model(None).model  # type: ignore[no-any-return]


def _run(identity: Identity, thread_id: str, text: str = "Plan a weekend in Lisbon") -> Run:
    sent = services.send(
        identity,
        thread_id,
        {"role": "user", "parts": [{"type": "text", "text": text}]},
        dispatch=False,
    )
    assert sent.run is not None
    asyncio.run(aexecute_run(sent.run.id))
    return Run.objects.get(id=sent.run.id)


def _title_job(run: Run) -> str | None:
    return asyncio.run(titles.agenerate(run.thread_id, run.id))


def _heads(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["thread"] for e in events if e["type"] == "thread.updated"]


# --------------------------------------------------------------------------- AD-041, AD-042


def test_ad_041_042_a_completed_run_stores_a_generated_title_record(
    alice: Identity, executor: _Executor, published: list[dict[str, Any]], register: Any
) -> None:
    agent = register(_agent(True))
    thread = services.create_thread(alice, agent="titled")
    run = _run(alice, thread.id)

    assert run.status == "completed"
    assert executor.titles == [(thread.id, run.id)]  # scheduled after the run, not in it
    assert Thread.objects.get(id=thread.id).title == ""
    assert _title_job(run) == TITLE

    stored = Thread.objects.get(id=thread.id)
    assert (stored.title, stored.title_source) == (TITLE, "generated")
    assert stored.title_generated_at is not None
    assert (stored.title_runs, stored.title_messages) == (1, 2)
    # AD-041: the thread head (snapshot and event) and the thread list show it.
    head = build_snapshot(alice, thread.id)["thread"]
    assert head["title"] == TITLE and head["titleSource"] == "generated"
    assert thread_public(stored) == head
    assert [t.title for t in services.list_threads(alice).items] == [TITLE]
    assert _heads(published) == [head]

    # AD-046: the title call is a bare request on the selected model.
    main, title_call = _model(agent).requests
    assert main.settings == {"temperature": 0.3} and dict(main.provider_options)
    assert (
        title_call.settings == {"maxOutputTokens": 32} and dict(title_call.provider_options) == {}
    )
    assert title_call.tools == []
    assert "User: Plan a weekend in Lisbon" in title_call.messages[0]["content"][0]["text"]


def test_ad_041_the_http_thread_list_and_head_show_the_title(
    api_client: Client, executor: _Executor, register: Any, wait_for_run: Callable[..., Run]
) -> None:
    register(_agent(True))
    api_client.get("/")  # the session (identity) and CSRF cookie, as the chat page does
    headers = {"HTTP_X_CSRFTOKEN": api_client.cookies["csrftoken"].value}
    created = api_client.post(
        f"{API}/threads", data=json.dumps({"agent": "titled"}), content_type="application/json"
    ).json()
    assert (created["title"], created["titleSource"]) == ("", "")
    sent = api_client.post(
        f"{API}/threads/{created['id']}/messages",
        data=json.dumps({"text": "Plan a weekend in Lisbon"}),
        content_type="application/json",
        **headers,
    )
    assert sent.status_code == 202, sent.content
    run = wait_for_run(sent.json()["run"]["id"])  # on the thread executor
    assert run.status == "completed" and _title_job(run) == TITLE

    listed = api_client.get(f"{API}/threads").json()["threads"]
    assert [(t["title"], t["titleSource"]) for t in listed] == [(TITLE, "generated")]
    got = api_client.get(f"{API}/threads/{created['id']}").json()
    assert got["title"] == TITLE


def test_ad_042_no_title_after_failed_or_cancelled_runs(
    alice: Identity, executor: _Executor, register: Any
) -> None:
    signal = AbortSignal()
    generated: list[ThreadTitleInput] = []

    def respond(request: ModelRequest) -> ScriptedStep:
        text = request.messages[-1]["content"][0]["text"]
        if "fail" in text:
            return ScriptedStep(fail_with=RuntimeError("the model broke"))
        signal.abort("stop")  # the user stops the run while it streams
        return ScriptedStep(text="a long answer " * 20, chunk_size=2, delay=0.01)

    register(_agent(ThreadTitles(generator=generated.append), respond=respond))
    thread = services.create_thread(alice, agent="titled")
    failed = _run(alice, thread.id, "please fail")
    sent = services.send(
        alice, thread.id, {"parts": [{"type": "text", "text": "stop me"}]}, dispatch=False
    )
    assert sent.run is not None
    asyncio.run(aexecute_run(sent.run.id, signal=signal))
    cancelled = Run.objects.get(id=sent.run.id)

    assert (failed.status, cancelled.status) == ("failed", "cancelled")
    assert executor.titles == []
    # Even a job handed a run that did not complete stores nothing.
    assert _title_job(failed) is None and _title_job(cancelled) is None
    assert generated == []
    stored = Thread.objects.get(id=thread.id)
    assert (stored.title, stored.title_source, stored.title_generated_at) == ("", "", None)


# --------------------------------------------------------------------------- AD-043


def test_ad_043_once_stores_at_most_one_automatic_title(
    alice: Identity, executor: _Executor, register: Any
) -> None:
    calls: list[ThreadTitleInput] = []

    def generator(title_input: ThreadTitleInput) -> str:
        calls.append(title_input)
        return f"Title {len(calls)}"

    register(_agent(ThreadTitles(generate="once", overwrite="generated", generator=generator)))
    thread = services.create_thread(alice, agent="titled")
    first = _run(alice, thread.id)
    assert _title_job(first) == "Title 1"
    second = _run(alice, thread.id, "And Porto?")

    assert len(executor.titles) == 2  # scheduled after each completed run ...
    assert _title_job(second) is None  # ... but the schedule is no longer due
    assert len(calls) == 1
    assert Thread.objects.get(id=thread.id).title == "Title 1"


def test_ad_043_refresh_regenerates_when_the_thresholds_are_due(
    alice: Identity, executor: _Executor, register: Any
) -> None:
    calls: list[ThreadTitleInput] = []

    def generator(title_input: ThreadTitleInput) -> str:
        calls.append(title_input)
        return f"Title {len(calls)}"

    config = ThreadTitles(generate="refresh", after_runs=2, after_messages=4, min_age_ms=60_000)
    register(_agent(ThreadTitles(**{**config.__dict__, "generator": generator})))
    thread = services.create_thread(alice, agent="titled")

    def age() -> None:
        stored = Thread.objects.get(id=thread.id)
        assert stored.title_generated_at is not None
        earlier = stored.title_generated_at - timedelta(minutes=2)
        Thread.objects.filter(id=thread.id).update(title_generated_at=earlier)

    assert _title_job(_run(alice, thread.id, "question 0")) == "Title 1"  # due at once
    assert _title_job(_run(alice, thread.id, "question 1")) is None  # 1 run, 2 messages
    third = _run(alice, thread.id, "question 2")
    assert _title_job(third) is None  # 2 runs and 4 messages, but too young
    age()
    assert _title_job(third) == "Title 2"
    stored = Thread.objects.get(id=thread.id)
    assert (stored.title, stored.title_runs, stored.title_messages) == ("Title 2", 3, 6)
    assert [c.title for c in calls] == ["", "Title 1"]
    assert [len(c.messages) for c in calls] == [2, 6]

    age()
    assert _title_job(_run(alice, thread.id, "question 3")) is None  # old, but 1 run
    assert _title_job(_run(alice, thread.id, "question 4")) == "Title 3"
    assert len(calls) == 3


# --------------------------------------------------------------------------- AD-044, AD-045


def test_ad_045_a_manual_rename_is_never_replaced(
    alice: Identity, executor: _Executor, published: list[dict[str, Any]], register: Any
) -> None:
    calls: list[ThreadTitleInput] = []
    register(_agent(ThreadTitles(generate="refresh", generator=lambda i: calls.append(i) or "X")))
    renamed = services.create_thread(alice, agent="titled")
    services.rename_thread(alice, renamed.id, "  My   trip ")  # publishes thread.updated
    created_titled = services.create_thread(alice, agent="titled", title="Given by the app")

    for thread_id in (renamed.id, created_titled.id):
        assert _title_job(_run(alice, thread_id)) is None
    assert calls == []  # AD-048: not due, so never called
    assert [(t.title, t.title_source) for t in Thread.objects.order_by("created_at")] == [
        ("My trip", "manual"),
        ("Given by the app", "manual"),
    ]
    assert [h["title"] for h in _heads(published)] == ["My trip"]


def test_ad_045_a_rename_through_the_client_api_is_manual(
    api_client: Client, executor: _Executor, register: Any
) -> None:
    register(_agent(ThreadTitles(generate="refresh", generator=lambda i: "Generated")))
    api_client.get("/")
    headers = {"HTTP_X_CSRFTOKEN": api_client.cookies["csrftoken"].value}
    created = api_client.post(
        f"{API}/threads", data=json.dumps({"agent": "titled"}), content_type="application/json"
    ).json()
    thread = Thread.objects.get(id=created["id"])
    identity = Identity(scope_key=thread.scope_key)
    assert _title_job(_run(identity, thread.id)) == "Generated"

    patched = api_client.patch(
        f"{API}/threads/{thread.id}",
        data=json.dumps({"title": "Picked by me"}),
        content_type="application/json",
        **headers,
    ).json()
    assert (patched["title"], patched["titleSource"]) == ("Picked by me", "manual")
    assert _title_job(_run(identity, thread.id)) is None
    assert Thread.objects.get(id=thread.id).title == "Picked by me"


def test_ad_044_045_overwrite_always_replaces_a_manual_title(
    alice: Identity, executor: _Executor, register: Any
) -> None:
    register(_agent(ThreadTitles(overwrite="always")))
    thread = services.create_thread(alice, agent="titled")
    services.rename_thread(alice, thread.id, "Mine")

    assert _title_job(_run(alice, thread.id)) == TITLE
    stored = Thread.objects.get(id=thread.id)
    assert (stored.title, stored.title_source) == (TITLE, "generated")


def test_ad_045_a_rename_during_generation_wins(
    alice: Identity, executor: _Executor, published: list[dict[str, Any]], register: Any
) -> None:
    def generator(title_input: ThreadTitleInput) -> str:
        services.rename_thread(alice, title_input.thread_id, "Renamed meanwhile")
        return "Too late"

    register(_agent(ThreadTitles(generator=generator)))
    thread = services.create_thread(alice, agent="titled")

    assert _title_job(_run(alice, thread.id)) is None
    stored = Thread.objects.get(id=thread.id)
    assert (stored.title, stored.title_source) == ("Renamed meanwhile", "manual")
    assert stored.title_generated_at is None
    # Only the rename announced a head; the late title published none.
    assert [h["title"] for h in _heads(published)] == ["Renamed meanwhile"]


# --------------------------------------------------------------------------- AD-046..AD-049


def test_ad_046_047_title_model_and_instruction_builder_per_call(
    alice: Identity, executor: _Executor, register: Any
) -> None:
    title_model = ScriptedModel(steps=[ScriptedStep.reply("First"), ScriptedStep.reply("Second")])
    built: list[ThreadTitleInput] = []

    def instructions(title_input: ThreadTitleInput) -> str:
        built.append(title_input)
        return f"Name it (was {title_input.title or 'untitled'})"

    config = ThreadTitles(generate="refresh", model=title_model, instructions=instructions)
    agent = register(_agent(config))
    thread = services.create_thread(alice, agent="titled")
    assert _title_job(_run(alice, thread.id)) == "First"
    assert _title_job(_run(alice, thread.id, "More")) == "Second"

    assert [r.system for r in title_model.requests] == [
        "Name it (was untitled)",
        "Name it (was First)",
    ]
    assert [b.run_id for b in built] == list(
        Run.objects.filter(thread_id=thread.id).order_by("created_at").values_list("id", flat=True)
    )
    assert all(r.settings == {"maxOutputTokens": 32} for r in title_model.requests)
    assert all(r.system != DEFAULT_TITLE_INSTRUCTIONS for r in _model(agent).requests)


def test_ad_048_049_custom_generator_input_and_empty_results(
    alice: Identity, executor: _Executor, register: Any
) -> None:
    results = iter([None, "", "  Real \n title "])
    seen: list[ThreadTitleInput] = []
    unused_model = ScriptedModel(steps=[])

    async def generator(title_input: ThreadTitleInput) -> str | None:
        seen.append(title_input)
        return next(results)

    register(_agent(ThreadTitles(model=unused_model, generator=generator)))
    thread = services.create_thread(alice, agent="titled")
    first = _run(alice, thread.id)
    assert _title_job(first) is None  # AD-049: None leaves it unchanged
    assert _title_job(first) is None  # AD-049: so does an empty string
    assert (Thread.objects.get(id=thread.id).title_source, seen[0].title) == ("", "")
    assert _title_job(first) == "Real title"

    assert unused_model.requests == []
    assert [m["role"] for m in seen[0].messages] == ["user", "assistant"]
    assert seen[0].identity == alice.data and seen[0].run_id == first.id


# --------------------------------------------------------------------------- executors


def test_the_in_process_executor_titles_the_demo_agent_in_the_background(
    alice: Identity,
) -> None:
    """AD-042 on the configured executor: the title job runs as a background task after
    the run; the demo's offline model names the chat after its first question."""
    thread = services.create_thread(alice)
    run = _run(alice, thread.id, "What is 6 * 7?")
    assert run.status == "completed"
    deadline = time.monotonic() + 20
    while not (stored := Thread.objects.get(id=thread.id)).title:
        assert time.monotonic() < deadline, "no title was generated"
        time.sleep(0.05)
    assert (stored.title, stored.title_source) == ("Calculating 6 * 7", "generated")


def test_the_celery_executor_sends_a_title_task(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[str, str]] = []
    monkeypatch.setattr(
        "pai_threads.tasks.generate_thread_title.delay", lambda *args: sent.append(args)
    )
    CeleryExecutor().dispatch_title("thr_1", "run_1")
    assert sent == [("thr_1", "run_1")]
