"""``pai_chat --jsonl`` through the real AI SDK: ``readUIMessageStream`` folds each step's
``start`` .. ``finish`` to exactly the stored message (metadata included), as the HTTP API
shows it (``client_message`` joins ToolData on both sides)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings

from pai_agents.messages.projection import client_message
from pai_threads.events.projections import messages_out
from pai_threads.models import Message, Thread
from tests.support.ai_sdk import read_ui_message_stream

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AGENTS = ["tests.support.agents.slow", "tests.support.agents.toolbox"]
AGENTS += ["tests.support.tool_data_agents.reporter"]


def jsonl(agent: str, text: str, scope: str) -> tuple[list[dict[str, Any]], str]:
    out, err = io.StringIO(), io.StringIO()
    pai = {**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], *AGENTS]}
    with override_settings(PAI=pai):
        call_command(
            "pai_chat", text, "--agent", agent, "--jsonl", "--scope", scope, stdout=out, stderr=err
        )
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    chunks = [line for line in lines if "role" not in line]
    thread = Thread.objects.get(scope_key=scope)
    return chunks, thread.id


@pytest.mark.parametrize(
    ("agent", "text"),
    [("slow", "hi"), ("toolbox", "use tools"), ("reporter", "go")],
)
def test_jsonl_folds_to_the_stored_messages_with_the_real_sdk(agent: str, text: str) -> None:
    chunks, thread_id = jsonl(agent, text, f"cli:jsonl-{agent}")
    rows = Message.objects.filter(thread_id=thread_id, role="assistant").order_by("id")
    stored = messages_out(list(rows))
    folded = read_ui_message_stream(chunks, split=True)
    assert folded.invalid == [] and folded.errors == [] and folded.valid
    assert [client_message(m) for m in folded.messages] == stored
    for message in folded.messages:
        pai = message["metadata"]["pai"]
        assert pai["status"] == "committed" and pai["usage"] and pai["runId"]
    assert [c["type"] for c in chunks].count("finish") == len(stored)
