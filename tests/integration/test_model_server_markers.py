"""What a real model server's limits look like to users, on the database (issue 11).

A step cut by ``length`` with its refused calls and a run stopped by ``max_steps`` are
marked in the stored message's ``metadata.pai.diagnostics`` (the API's projection) and
``pai_chat`` prints a note for each; a title job still calling the model yields to a run
that starts on its thread. The provider and the HTTP server are real (the scripted fake).
"""

from __future__ import annotations

import asyncio
import functools
import io
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from pai_agents import AgentDefinition, define_agent, tool
from pai_agents.abort import AbortSignal
from pai_agents.models.base import ModelRequest, StepStreamPart
from pai_agents.models.openai_chat import OpenAIChatModel
from pai_threads import services
from pai_threads.execution import registry, titles
from pai_threads.identity import Identity
from pai_threads.models import Message
from tests.support.engine_harness import Args
from tests.support.fake_openai import (
    FakeOpenAIServer,
    SSEResponse,
    finish_chunk,
    text_chunks,
    text_response,
    tool_call_chunks,
    usage_chunk,
)

pytestmark = pytest.mark.django_db(transaction=True)


@tool(input=Args)
def probe(args: Args) -> str:
    """Look something up."""
    return f"found {args.q}"


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def _register(monkeypatch: pytest.MonkeyPatch, agent: AgentDefinition) -> None:
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", functools.lru_cache(maxsize=None)(lambda: agents))
    monkeypatch.setattr(titles, "schedule", lambda **kwargs: None)


class ClosingModel(OpenAIChatModel):
    """Closes its HTTP client after each call: pai_chat and these tests run each turn in a
    fresh ``asyncio.run``, and a client left open there is an unclosed-resource warning."""

    async def stream(
        self, request: ModelRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StepStreamPart]:
        try:
            async for part in super().stream(request, signal=signal):
                yield part
        finally:
            await self.aclose()


def _agent(server: FakeOpenAIServer, name: str, **options: Any) -> AgentDefinition:
    model = ClosingModel(model="fake-model", base_url=server.base_url, timeout=10)
    return define_agent(name, instructions="Help.", model=model, tools=[probe], **options)


def _chat(agent: str, text: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("pai_chat", text, agent=agent, scope="cli:tester", stdout=out, stderr=err)
    except CommandError as exc:
        err.write(f"command error: {exc}\n")
    return out.getvalue(), err.getvalue()


def _calls(count: int, reason: str) -> list[Any]:
    chunks: list[Any] = []
    for i in range(count):
        chunks += tool_call_chunks(f"call_{i}", "probe", f'{{"q": "{i}"}}', index=i)
    return [*chunks, finish_chunk(reason), usage_chunk(20, 30)]


def _assistant_diagnostics() -> list[dict[str, Any]]:
    rows = Message.objects.filter(role="assistant").order_by("id")
    return [row.to_ui_message()["metadata"]["pai"]["diagnostics"] for row in rows]


def test_a_length_cut_step_is_marked_in_the_api_and_in_pai_chat(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _register(monkeypatch, _agent(server, "cut"))
    server.add(_calls(2, "length"), text_response("Sorry, again"))
    _, err = _chat("cut", "Look up two things")
    first, _second = _assistant_diagnostics()
    assert first["finishReason"] == "length" and first["toolCallsRefused"] == 2
    assert "note: the answer was cut off by the output token limit" in err
    assert "note: 2 tool call(s) were not executed" in err


def test_a_run_stopped_by_max_steps_is_marked_in_the_api_and_in_pai_chat(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _register(monkeypatch, _agent(server, "budget", max_steps=1))
    server.add(_calls(1, "tool_calls"))
    _, err = _chat("budget", "Look it up")
    (only,) = _assistant_diagnostics()
    assert only["maxStepsReached"] is True
    assert "note: the run stopped at its step limit (max_steps)" in err


def test_an_ordinary_run_prints_no_notes(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _register(monkeypatch, _agent(server, "plain"))
    server.add(text_response("Hello"))
    _, err = _chat("plain", "Hi")
    assert "note:" not in err


def test_a_title_job_yields_to_a_run_starting_on_its_thread(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, alice: Identity
) -> None:
    """On a single-slot server the user's next message would wait behind the title call:
    a run starting on the thread aborts the title job's model call (the server sees the
    client hang up) and the title stays as it was."""
    agent = _agent(server, "titled", thread_titles=True)
    _register(monkeypatch, agent)
    thread = services.create_thread(alice, agent=agent.name)
    server.add(text_response("Sure."))
    sent = services.send(
        alice,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": "Hi"}]},
        dispatch=False,
    )
    assert sent.run is not None
    run_id = sent.run.id
    from pai_threads.execution.execute import aexecute_run

    asyncio.run(aexecute_run(run_id))
    server.add(SSEResponse(chunks=text_chunks("Slow", pieces=1), hang=True))

    async def title_then_run() -> str | None:
        job = asyncio.create_task(titles.agenerate(thread.id, run_id))
        while len(server.exchanges) < 2:
            await asyncio.sleep(0.01)
        titles.yield_to_run(thread.id)  # what aexecute_run does right after its claim
        return await asyncio.wait_for(job, timeout=10)

    assert asyncio.run(title_then_run()) is None
    assert server.exchanges[1].client_disconnected.wait(10)
    thread.refresh_from_db()
    assert thread.title == ""


@pytest.mark.parametrize(
    ("changes", "flagged"),
    [
        ({"MODEL_MAX_RETRIES": 0, "MODEL_RETRY_BACKOFF_SECONDS": 0}, False),
        ({"MODEL_MAX_RETRIES": -1}, True),
        ({"MAX_TOOL_CALLS_PER_STEP": 0}, True),
        ({"MODEL_RETRY_BACKOFF_SECONDS": "fast"}, True),
    ],
)
def test_the_new_settings_are_checked(
    settings: Any, changes: dict[str, Any], flagged: bool
) -> None:
    """No retries (0) is a valid choice; a negative count, no tool calls at all, or a
    non-number is pai.E016."""
    from django.core.checks import run_checks

    settings.PAI = {**getattr(settings, "PAI", {}), **changes}
    ids = {m.id for m in run_checks(tags=["pai"]) if any(k in m.msg for k in changes)}
    assert ("pai.E016" in ids) is flagged
