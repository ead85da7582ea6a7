"""The hot path's statements are prepared once per connection on PostgreSQL (issue 16).

Planning took 0.15-0.45 ms per statement on every execution, more than executing it;
:func:`pai_threads.store.prepared.prepared_cursor` prepares each on its first execution on
a connection. ``PAI["PREPARED_STATEMENTS"] = False`` (poolers that cannot carry them)
prepares nothing; a test capturing queries still sees each statement with its values.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from pai_threads.models import Run, Thread
from pai_threads.store.rows import active_run

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's prepare"),
]


@pytest.fixture
def thread() -> Thread:
    thread = Thread.objects.create(scope_key="prepared", agent_name="a")
    Run.objects.create(thread=thread, scope_key="prepared", agent_name="a")
    return thread


def _prepared(fragment: str) -> list[Any]:
    """This session's prepared statements whose text contains ``fragment``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement FROM pg_prepared_statements WHERE statement LIKE %s",
            [f"%{fragment}%"],
        )
        return [row[0] for row in cursor.fetchall()]


ACTIVE_RUN_READ = '"pai_threads_run"."active" AND'


def test_a_hot_statement_is_prepared_once_and_reused(thread: Thread) -> None:
    first = active_run(thread.pk)
    assert first is not None and first.status == "queued"
    assert len(_prepared(ACTIVE_RUN_READ)) == 1
    other = Thread.objects.create(scope_key="prepared", agent_name="a")
    assert active_run(other.pk) is None
    assert active_run(thread.pk) == first
    assert len(_prepared(ACTIVE_RUN_READ)) == 1  # the same statement, executed three times


def test_nothing_is_prepared_when_the_setting_is_off(thread: Thread) -> None:
    with override_settings(PAI={**settings.PAI, "PREPARED_STATEMENTS": False}):
        assert active_run(thread.pk) is not None
    assert _prepared(ACTIVE_RUN_READ) == []


def test_captured_queries_show_the_statement_with_its_values(thread: Thread) -> None:
    with CaptureQueriesContext(connection) as queries:
        active_run(thread.pk)
    [captured] = [q["sql"] for q in queries.captured_queries]
    assert ACTIVE_RUN_READ in captured and f"'{thread.pk}'" in captured
    assert len(_prepared(ACTIVE_RUN_READ)) == 1
