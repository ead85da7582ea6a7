"""A thread's messages are read on the thread's index whatever its age (PostgreSQL).

``thread_id = X ORDER BY id DESC LIMIT n`` is planned by PostgreSQL as a backward scan of
the primary key when it assumes the thread's rows are spread over the table; for a thread
older than most rows it then filters every newer message of every other thread, so the
context window, the transcript page and the lifecycle's pages of an old thread grew with
the whole table (23 ms behind 100,000 newer messages). The reads now name the thread as a
range and order by ``(thread_id, id)`` (``pai_threads.models.conditions.in_thread_order``).
These tests read the real plans, with real statistics (ANALYZE), of an old thread behind
a much larger new one, and of the new one oldest-first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from pai_agents.engine.store import Lease
from pai_agents.lifecycle.backend import PageQuery, ThreadScope
from pai_threads.identity import Identity
from pai_threads.models import Message, Thread
from pai_threads.services import list_messages
from pai_threads.store.context_reads import context_messages
from pai_threads.store.lifecycle_backend import ORMLifecycleBackend
from tests.support.plans import sent_statements

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

SCOPE = "order-plans"
IDENTITY = Identity(scope_key=SCOPE, data={})
NEWER_THREADS = 8  # 40,000 newer messages: enough for the primary-key plan to be chosen


def _fill(thread: Thread, count: int) -> None:
    Message.objects.bulk_create(
        (
            Message(
                message_id=f"m{n}",
                thread=thread,
                scope_key=thread.scope_key,
                role="user" if n % 2 == 0 else "assistant",
                parts=[{"type": "text", "text": "x" * 40}],
                status=Message.Status.COMMITTED,
            )
            for n in range(count)
        ),
        batch_size=2000,
    )


@pytest.fixture
def threads() -> tuple[Thread, Thread]:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's planner; SQLite's plans are read in test_lean_index_plans")
    old = Thread.objects.create(scope_key=SCOPE, agent_name="a")
    _fill(old, 2000)
    for _ in range(NEWER_THREADS):
        new = Thread.objects.create(scope_key=SCOPE, agent_name="a")
        _fill(new, 5000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE pai_threads_message")
    return old, new


def _plan(call: Callable[[], Any]) -> str:
    """EXPLAIN ANALYZE of the one message read ``call`` sends."""
    reads = [(s, p) for s, p in sent_statements(call) if 'FROM "pai_threads_message"' in s]
    assert len(reads) == 1, reads
    sql, params = reads[0]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN ANALYZE {sql}", params)
        return "\n".join(str(row[0]) for row in cursor.fetchall())


def _removed(plan: str) -> int:
    return sum(int(n) for n in re.findall(r"Rows Removed by Filter: (\d+)", plan))


def _on_the_threads_index(plan: str) -> None:
    assert "pai_threads_message_pkey" not in plan, plan
    assert "Seq Scan" not in plan, plan
    assert _removed(plan) <= 100, plan  # never the newer threads' 40,000 rows


def test_the_context_window_of_an_old_thread(threads: tuple[Thread, Thread]) -> None:
    old, _ = threads
    _on_the_threads_index(_plan(lambda: context_messages(old.id, 100)))
    assert [m["id"] for m in context_messages(old.id, 3)] == ["m1997", "m1998", "m1999"]


def test_the_transcript_page_of_an_old_thread(threads: tuple[Thread, Thread]) -> None:
    old, _ = threads
    _on_the_threads_index(_plan(lambda: list_messages(IDENTITY, old.id, limit=50)))
    page = list_messages(IDENTITY, old.id, limit=2)
    assert [m.message_id for m in page.items] == ["m1998", "m1999"]


@pytest.mark.parametrize("descending", [True, False])
def test_lifecycle_pages_read_either_end_of_any_thread(
    threads: tuple[Thread, Thread], descending: bool
) -> None:
    backend = ORMLifecycleBackend()
    for thread in threads:  # newest-first of the old one, oldest-first of the new one
        lease = Lease(run_id="run_none", thread_id=thread.id, scope_key=SCOPE, owner="t", token=1)
        scope = ThreadScope(scope_key=SCOPE, thread_id=thread.id, lease=lease)

        def page(limit: int, scope: ThreadScope = scope) -> list[Any]:
            query = PageQuery(
                view="transcript", descending=descending, above=None, below=None, limit=limit
            )
            return list(backend.page(scope, query))

        _on_the_threads_index(_plan(lambda: page(20)))
        ids = [p.message.id for p in page(2)]
        count = Message.objects.filter(thread=thread).count()
        expected = [f"m{count - 1}", f"m{count - 2}"] if descending else ["m0", "m1"]
        assert ids == expected
