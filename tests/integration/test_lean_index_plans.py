"""Reads that lost an index of their own (issue 16, W2's WAL per run) stay index-driven.

Migration 0016 dropped the transcript's partial twin of ``pai_msg_thread_position``: a
transcript read walks the thread's position index and skips the few hidden rows. SQLite's
plans are read as the statements are sent.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from pai_threads.models import Message, Run, Step, Thread
from tests.support.plans import sent_plan

pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "plans"


@pytest.fixture
def thread() -> Thread:
    """A thread of 50 answered runs, every fifth answer hidden (regenerated), and a thread
    of another scope."""
    now = timezone.now()
    other = Thread.objects.create(scope_key="other", agent_name="a")
    thread = Thread.objects.create(scope_key=SCOPE, agent_name="a")
    for owner in (other, thread):
        runs = Run.objects.bulk_create(
            Run(thread=owner, scope_key=owner.scope_key, agent_name="a", status="completed")
            for _ in range(50)
        )
        Message.objects.bulk_create(
            Message(
                message_id=f"{role}-{n}",
                thread=owner,
                scope_key=owner.scope_key,
                run=run,
                role=role,
                producer="model",
                step_index=0 if role == "assistant" else None,
                in_transcript=not (role == "assistant" and n % 5 == 0),
            )
            for n, run in enumerate(runs)
            for role in ("user", "assistant")
        )
        Step.objects.bulk_create(
            Step(run=run, index=0, started_at=now, finished_at=now) for run in runs
        )
    return thread


@pytest.mark.skipif(connection.vendor != "sqlite", reason="reads SQLite's plan as sent")
def test_a_transcript_page_walks_the_threads_position_index(thread: Thread) -> None:
    transcript = Message.objects.filter(thread=thread, in_transcript=True).order_by("-id")
    newest = sent_plan(lambda: list(transcript[:21]))
    older = sent_plan(lambda: list(transcript.filter(id__lt=10**9)[:21]))
    for plan in (newest, older):
        assert "USING INDEX pai_msg_thread_position (thread_id=?" in plan
        assert "TEMP B-TREE" not in plan  # read in thread order, not sorted
