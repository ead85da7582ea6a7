"""Commands on Django (docs/commands.md): ``POST /api/pai/threads/{id}/commands/{name}`` and
``services.invoke_command`` with the ``commander`` agent (tests/support/command_agents.py).

The caller's scope decides which threads it reaches, server-only commands are not
disclosed, input is validated with typed errors (never a 500), facade writes land in the
thread (private metadata stays private), and a command can start a run with initiator
``command`` that is queued by the thread's send policy like a send.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client

from pai_threads import services
from pai_threads.errors import NotFound
from pai_threads.execution import registry
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Message, QueueItem, Run, Thread

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"
AGENTS = "tests.support.command_agents"


@pytest.fixture(autouse=True)
def commander(settings: Any) -> Iterator[Callable[[dict[str, Any]], None]]:
    base = settings.PAI

    def configure(capabilities: dict[str, Any]) -> None:
        settings.PAI = {
            **base,
            "AGENTS": [*base["AGENTS"], f"{AGENTS}.commander"],
            "CAPABILITIES": capabilities,
        }
        registry.clear_cache()

    configure({"clock": f"{AGENTS}.office_clock"})
    yield configure
    registry.clear_cache()


class Caller:
    """A browser-like client with its session identity and CSRF token."""

    def __init__(self) -> None:
        self.client = Client(enforce_csrf_checks=True)
        self.client.get("/")
        token = self.client.cookies.get("csrftoken")
        self.headers = {"HTTP_X_CSRFTOKEN": token.value} if token else {}

    def post(self, path: str, body: Any, *, raw: bool = False) -> Any:
        data = body if raw else json.dumps(body)
        return self.client.post(
            f"{API}{path}", data=data, content_type="application/json", **self.headers
        )

    def thread(self) -> str:
        created = self.post("/threads", {"agent": "commander"})
        assert created.status_code == 201, created.content
        return str(created.json()["id"])

    def command(self, thread_id: str, name: str, body: Any = None, **kw: Any) -> Any:
        return self.post(
            f"/threads/{thread_id}/commands/{name}", {} if body is None else body, **kw
        )


def _error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code, error
    return dict(error)


def test_a_command_over_http_answers_with_its_validated_output() -> None:
    alice = Caller()
    thread_id = alice.thread()
    answer = alice.command(thread_id, "export_transcript", {"input": {"format": "json"}})
    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "command": "export_transcript",
        "output": {"count": 0, "text": "[]"},
        "run": None,
        "message": None,
        "queued": None,
    }
    assert not Message.objects.filter(thread_id=thread_id).exists(), "a command is no message"


def test_writes_through_the_facade_land_in_the_thread_and_private_stays_private() -> None:
    alice = Caller()
    thread_id = alice.thread()
    noted = alice.command(thread_id, "add_note", {"input": {"text": "call back Monday"}})
    assert noted.status_code == 200, noted.content
    message_id = noted.json()["output"]["messageId"]
    row = Message.objects.get(thread_id=thread_id, message_id=message_id)
    assert row.role == "assistant" and row.parts == [
        {"type": "text", "text": "Note: call back Monday"}
    ]
    exported = alice.command(thread_id, "export_transcript").json()["output"]
    assert exported == {"count": 1, "text": "- assistant: Note: call back Monday"}

    resolved = alice.command(thread_id, "mark_resolved")
    assert resolved.status_code == 200 and resolved.json()["output"] == {"resolved": True}
    thread = Thread.objects.get(id=thread_id)
    assert thread.metadata == {"resolved": True}
    assert thread.private_metadata == {"resolved_by": ""}  # an anonymous session
    head = alice.client.get(f"{API}/threads/{thread_id}").json()
    assert head["metadata"] == {"resolved": True}
    assert "resolved_by" not in json.dumps(head)


def test_a_server_only_command_is_not_found_over_http_but_server_code_calls_it() -> None:
    alice = Caller()
    thread_id = alice.thread()
    hidden = _error(alice.command(thread_id, "purge"), 404, "not_found")
    missing = _error(alice.command(thread_id, "no_such_command"), 404, "not_found")
    assert hidden == missing, "a server-only command's existence is not disclosed"

    thread = Thread.objects.get(id=thread_id)
    trusted = services.invoke_command(Identity(scope_key=thread.scope_key), thread_id, "purge")
    assert trusted.output == {"purged": thread_id}
    with pytest.raises(NotFound):
        services.invoke_command(
            Identity(scope_key=thread.scope_key), thread_id, "purge", exposed_only=True
        )


def test_another_scopes_thread_is_not_found() -> None:
    alice, bob = Caller(), Caller()
    thread_id = alice.thread()
    _error(bob.command(thread_id, "export_transcript"), 404, "not_found")
    _error(bob.command(thread_id, "add_note", {"input": {"text": "x"}}), 404, "not_found")
    assert not Message.objects.filter(thread_id=thread_id).exists()


BAD_BODIES: list[tuple[str, Any, int, str]] = [
    ("input-array", {"input": [1, 2]}, 422, "invalid_input"),
    ("input-string", {"input": "x"}, 422, "invalid_input"),
    ("input-null", {"input": None}, 422, "invalid_input"),
    ("client-data-number", {"clientData": 3}, 422, "invalid_input"),
    ("unknown-key", {"inputs": {}}, 422, "invalid_input"),
    ("body-array", [1], 422, "invalid_input"),
    ("wrong-type", {"input": {"text": 7}}, 422, "invalid_input"),
    ("missing-field", {"input": {}}, 422, "invalid_input"),
    ("too-long", {"input": {"text": "x" * 201}}, 422, "invalid_input"),
    ("nul", {"input": {"text": "a\u0000b"}}, 422, "invalid_input"),
    ("surrogate", '{"input": {"text": "\\ud800"}}', 422, "invalid_input"),
    (
        "deep",
        {"input": {"text": "x", "deep": json.loads("[" * 80 + "]" * 80)}},
        422,
        "invalid_input",
    ),
    ("malformed-json", '{"input": ', 400, "bad_request"),
    ("too-large", {"input": {"text": "x" * 300_000}}, 413, "payload_too_large"),
]


@pytest.mark.parametrize(
    ("body", "status", "code"), [b[1:] for b in BAD_BODIES], ids=[b[0] for b in BAD_BODIES]
)
def test_bad_input_gets_a_typed_error_and_changes_nothing(
    body: Any, status: int, code: str
) -> None:
    alice = Caller()
    thread_id = alice.thread()
    response = alice.command(thread_id, "add_note", body, raw=isinstance(body, str))
    _error(response, status, code)
    assert not Message.objects.filter(thread_id=thread_id).exists()


def test_input_errors_list_each_problem() -> None:
    alice = Caller()
    thread_id = alice.thread()
    error = _error(
        alice.command(thread_id, "export_transcript", {"input": {"format": "pdf"}}),
        422,
        "invalid_input",
    )
    assert [e["loc"] for e in error["details"]["errors"]] == [["format"]]
    assert "format" in error["message"]


def test_odd_names_and_a_missing_csrf_token_are_typed_errors() -> None:
    alice = Caller()
    thread_id = alice.thread()
    for name in ("%F0%9F%92%A5", "x" * 300, "export_transcript%00", "EXPORT_TRANSCRIPT"):
        _error(alice.command(thread_id, name), 404, "not_found")
    no_csrf = alice.client.post(
        f"{API}/threads/{thread_id}/commands/add_note",
        data=json.dumps({"input": {"text": "x"}}),
        content_type="application/json",
    )
    _error(no_csrf, 403, "forbidden")
    assert not Message.objects.filter(thread_id=thread_id).exists()


def test_a_refusal_shows_its_message_and_a_bug_shows_none() -> None:
    alice = Caller()
    thread_id = alice.thread()
    refused = _error(alice.command(thread_id, "refuse"), 422, "command_failed")
    assert refused["message"] == "There is nothing to export yet."
    broken = alice.command(thread_id, "broken")
    error = _error(broken, 500, "command_failed")
    assert "secret" not in broken.content.decode() and error["message"] == (
        "the command broken failed"
    )


def test_a_command_that_starts_a_run_completes_with_initiator_command(
    wait_for_run: Callable[..., Run],
) -> None:
    alice = Caller()
    thread_id = alice.thread()
    started = alice.command(thread_id, "summarise", {"input": {"words": 5}})
    assert started.status_code == 202, started.content
    body = started.json()
    assert body["queued"] is None and body["message"]["role"] == "user"
    run = wait_for_run(body["run"]["id"])
    assert run.status == Run.Status.COMPLETED and run.initiator == "command"
    assert body["run"]["initiator"] == "command"
    texts = [
        (m.role, " ".join(p["text"] for p in m.parts if p["type"] == "text"))
        for m in Message.objects.filter(thread_id=thread_id).order_by("id")
    ]
    assert texts == [
        ("user", "Summarise the conversation in 5 words."),
        ("assistant", "Here is the summary."),
    ]

    nudged = alice.command(thread_id, "nudge")
    assert nudged.status_code == 202, nudged.content
    second = wait_for_run(nudged.json()["run"]["id"])
    assert second.status == Run.Status.COMPLETED and second.initiator == "command"


def test_a_command_run_is_queued_by_the_send_policy_while_a_run_is_active(
    wait_for_run: Callable[..., Run],
) -> None:
    alice = Caller()
    thread_id = alice.thread()
    thread = Thread.objects.get(id=thread_id)
    identity = Identity(scope_key=thread.scope_key, data={"anonymous": True})
    active = services.send(
        identity,
        thread_id,
        {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
        dispatch=False,
    )
    assert active.run is not None

    queued = alice.command(thread_id, "summarise")
    assert queued.status_code == 202, queued.content
    body = queued.json()
    assert body["run"]["id"] == active.run.id and body["queued"]["status"] == "queued"
    assert "initiator" not in json.dumps(body["queued"]), "the queue projection is unchanged"
    _error(alice.command(thread_id, "nudge"), 409, "thread_busy")  # no message to queue

    asyncio.run(aexecute_run(active.run.id))  # its end admits the command's input
    item = QueueItem.objects.get(thread_id=thread_id)
    assert item.status == QueueItem.Status.ADMITTED and item.run is not None
    admitted = wait_for_run(item.run.id)
    assert admitted.initiator == "command" and admitted.status == Run.Status.COMPLETED


def test_commands_get_their_bound_capabilities_and_check_reports_a_gap(
    commander: Callable[[dict[str, Any]], None],
) -> None:
    """AD-062, AD-063 with commands: the command's capability is part of the agent's
    requirement map, bound from settings, and manage.py check reports it unbound."""
    alice = Caller()
    thread_id = alice.thread()
    assert alice.command(thread_id, "what_time").json()["output"] == {"time": "12:00"}
    assert set(registry.get_agent("commander").capabilities) == {"clock"}

    commander({})
    with pytest.raises(SystemCheckError, match=r"pai\.E020"):
        call_command("check", "--tag", "pai")
    error = _error(alice.command(thread_id, "what_time"), 500, "command_failed")
    assert "clock" not in error["message"], "operators' detail stays in the log"
