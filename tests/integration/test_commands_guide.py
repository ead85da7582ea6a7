"""The examples of docs/commands.md, executed from the page on Django.

The ``agent`` block is exec'd into a module registered in ``PAI["AGENTS"]``; the ``http``
and ``server`` blocks run as written against a thread of that agent, and the tests check
what the page claims: the exported text, the server-only command (refused over HTTP, run
by server code), the manifest and a ``summarise`` run with initiator ``command``.
"""

from __future__ import annotations

import json
import re
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from pai_threads import services
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Run, Thread
from tests.support.inline_runs import send_and_execute

pytestmark = pytest.mark.django_db(transaction=True)

DOC = Path(__file__).resolve().parents[2] / "docs" / "commands.md"
_BLOCK = re.compile(r"<!-- example: (\w+) -->\s*```python\n(.*?)```", re.DOTALL)
MODULE = "commands_guide_example"


def _examples() -> dict[str, str]:
    return dict(_BLOCK.findall(DOC.read_text()))


def _run(name: str, namespace: dict[str, Any]) -> dict[str, Any]:
    # dont_inherit: the page's code runs without this module's ``from __future__`` imports.
    exec(compile(_examples()[name], f"{DOC}:{name}", "exec", dont_inherit=True), namespace)
    return namespace


@pytest.fixture(autouse=True)
def guide_agent(settings: Any) -> Iterator[types.ModuleType]:
    module = types.ModuleType(MODULE)
    sys.modules[MODULE] = module
    _run("agent", module.__dict__)
    settings.PAI = {**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], f"{MODULE}.support"]}
    registry.clear_cache()
    yield module
    registry.clear_cache()
    sys.modules.pop(MODULE, None)


def _thread(client: Client) -> Thread:
    response = client.post(
        "/api/pai/threads", data={"agent": "support"}, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    return Thread.objects.get(id=response.json()["id"])


def test_the_http_example_exports_the_transcript(capsys: pytest.CaptureFixture[str]) -> None:
    client = Client()
    thread = _thread(client)
    identity = Identity(scope_key=thread.scope_key, data={"anonymous": True})
    refused = client.post(
        f"/api/pai/threads/{thread.id}/commands/export_transcript",
        data={},
        content_type="application/json",
    )
    assert refused.status_code == 422
    assert refused.json()["error"] == {
        "code": "command_failed",
        "message": "There is nothing to export yet.",
    }
    send_and_execute(identity, thread.id, "Hello")

    namespace = _run("http", {"thread_id": thread.id, "client": client})
    assert namespace["response"].status_code == 200
    assert capsys.readouterr().out == "user: Hello\nassistant: - one\n- two\n- three\n"


def test_the_server_example_calls_a_server_only_command() -> None:
    client = Client()
    thread = _thread(client)
    hidden = client.post(
        f"/api/pai/threads/{thread.id}/commands/close_thread",
        data={},
        content_type="application/json",
    )
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "not_found"
    identity = Identity(scope_key=thread.scope_key, data={"anonymous": True})
    _run("server", {"identity": identity, "thread_id": thread.id})
    assert Thread.objects.get(id=thread.id).metadata == {"closed": True}


def test_the_manifest_lists_the_exposed_commands_only() -> None:
    (manifest,) = [m for m in Client().get("/api/pai/agents").json() if m["name"] == "support"]
    assert manifest["commands"] == {
        "export_transcript": {
            "name": "export_transcript",
            "description": "Export the thread as text.",
            "startsRun": False,
        },
        "summarise": {
            "name": "summarise",
            "description": "Summarise the conversation so far.",
            "startsRun": True,
        },
    }
    assert "close_thread" not in json.dumps(manifest)


def test_summarise_starts_a_command_run(wait_for_run: Callable[..., Run]) -> None:
    client = Client()
    thread = _thread(client)
    response = client.post(
        f"/api/pai/threads/{thread.id}/commands/summarise",
        data={"input": {"bullets": 2}},
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["message"]["parts"] == [
        {"type": "text", "text": "Summarise the conversation so far in 2 bullets."}
    ]
    run = wait_for_run(body["run"]["id"])
    assert run.initiator == "command" and run.status == Run.Status.COMPLETED
    identity = Identity(scope_key=thread.scope_key)
    result = services.invoke_command(identity, thread.id, "export_transcript")
    assert result.output == {
        "text": "- user: Summarise the conversation so far in 2 bullets.\n"
        "- assistant: - one\n- two\n- three"
    }
