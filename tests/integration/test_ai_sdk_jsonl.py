"""``pai_chat --jsonl`` through the real AI SDK: ``readUIMessageStream`` folds each step's
``start`` .. ``finish`` to exactly the stored message (metadata included), as the HTTP API
shows it (``client_message`` joins ToolData on both sides)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import override_settings

from pai_agents.messages.projection import client_message
from pai_threads.events.projections import messages_out
from pai_threads.models import Message, Thread
from tests.support.ai_sdk import read_ui_message_stream

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AGENTS = ["tests.support.agents.slow", "tests.support.agents.toolbox"]
AGENTS += ["tests.support.tool_data_agents.reporter"]


def jsonl(
    agent: str, text: str, scope: str, *, waits: bool = False
) -> tuple[list[dict[str, Any]], str, list[dict[str, Any]]]:
    """The chunk lines, the thread id and the message lines of one ``pai_chat --jsonl``
    (``waits``: the run ends waiting, which the command reports as an error)."""
    out, err = io.StringIO(), io.StringIO()
    pai = {**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], *AGENTS]}
    argv = ["pai_chat", text, "--agent", agent, "--jsonl", "--scope", scope]
    with override_settings(PAI=pai):
        if waits:
            with pytest.raises(CommandError, match="ended waiting"):
                call_command(*argv, stdout=out, stderr=err)
        else:
            call_command(*argv, stdout=out, stderr=err)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    chunks = [line for line in lines if "role" not in line]
    thread = Thread.objects.get(scope_key=scope)
    return chunks, thread.id, [line for line in lines if "role" in line]


@pytest.mark.parametrize(
    ("agent", "text"),
    [("slow", "hi"), ("toolbox", "use tools"), ("reporter", "go")],
)
def test_jsonl_folds_to_the_stored_messages_with_the_real_sdk(agent: str, text: str) -> None:
    chunks, thread_id, _ = jsonl(agent, text, f"cli:jsonl-{agent}")
    rows = Message.objects.filter(thread_id=thread_id, role="assistant").order_by("id")
    stored = messages_out(list(rows))
    folded = read_ui_message_stream(chunks, split=True)
    assert folded.invalid == [] and folded.errors == [] and folded.valid
    assert [client_message(m) for m in folded.messages] == stored
    for message in folded.messages:
        pai = message["metadata"]["pai"]
        assert pai["status"] == "committed" and pai["usage"] and pai["runId"]
    assert [c["type"] for c in chunks].count("finish") == len(stored)


@pytest.mark.parametrize(
    ("agent", "text"), [("toolbox", "ask me"), ("toolbox", "needs approval"), ("reporter", "go")]
)
def test_jsonl_prints_the_stored_messages_as_clients_see_them(agent: str, text: str) -> None:
    """MF-011: the message lines are the client projection the HTTP API gives (ToolData
    joined onto its tool part, suspension records joined), never the raw rows' reserved
    parts."""
    scope = f"cli:jsonl-out-{agent}-{len(text)}"
    _, thread_id, printed = jsonl(agent, text, scope, waits=agent == "toolbox")
    rows = list(Message.objects.filter(thread_id=thread_id, in_transcript=True).order_by("id"))
    assert printed == messages_out(rows)
    assert printed and not [
        p["type"] for m in printed for p in m["parts"] if p["type"].startswith("data-pai-")
    ]
    tool_parts = [p for m in printed for p in m["parts"] if "toolCallId" in p]
    if agent == "reporter":
        assert tool_parts[0]["data"]["progress"] == [{"id": "main", "value": {"pct": 100}}]
    else:
        kind = "approval" if "approval" in text else "client"
        assert tool_parts[0]["pendingSuspension"]["kind"] == kind
