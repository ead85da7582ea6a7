"""What a run's row versions cost (issue 16, W2's WAL per run; migration 0018).

``Run.active`` is computed by the database from ``status``; the active-run index names it
instead of ``status``, so a claim (queued -> running) changes no indexed column and
PostgreSQL writes it as a heap-only (HOT) update, with no new entry in any index. A run's
steps and attempts refer to it without a database constraint (pai_threads.models'
docstring); a thread's rows, and a message's run (MF-044), keep theirs.
"""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, RunAttempt, Step, Thread
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db

IDENTITY = Identity(scope_key="row-versions", data={})
USER = {"role": "user", "parts": [{"type": "text", "text": "Hello"}]}


@pytest.fixture
def thread() -> Thread:
    return Thread.objects.create(scope_key="row-versions", agent_name="a")


@pytest.mark.parametrize("status", [choice.value for choice in Run.Status])
def test_active_is_computed_from_the_status_by_the_database(thread: Thread, status: str) -> None:
    run = Run.objects.create(thread=thread, scope_key="row-versions", agent_name="a")
    assert Run.objects.get(pk=run.pk).active is True  # queued
    Run.objects.filter(pk=run.pk).update(status=status)
    assert Run.objects.get(pk=run.pk).active is (status in Run.ACTIVE)
    assert list(Run.objects.active().filter(pk=run.pk)) == ([run] if status in Run.ACTIVE else [])


def test_one_active_run_per_thread_still_holds_on_the_computed_column(thread: Thread) -> None:
    Run.objects.create(thread=thread, scope_key="row-versions", agent_name="a")
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(
            thread=thread, scope_key="row-versions", agent_name="a", status="waiting"
        )
    Run.objects.create(thread=thread, scope_key="row-versions", agent_name="a", status="failed")


def _run_updates() -> tuple[int, int]:
    """(updates, heap-only updates) of the run table in this transaction so far."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = %s",
            [Run._meta.db_table],
        )
        row = cursor.fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's heap-only updates")
def test_a_claim_is_a_heap_only_update_of_the_run_row() -> None:
    thread = services.create_thread(IDENTITY, agent="assistant")
    sent = services.send(IDENTITY, thread.id, USER, dispatch=False)
    assert sent.run is not None
    before = _run_updates()
    ORMThreadStore().claim_run_sync(sent.run.id, owner="w", lease_seconds=60)
    updates, hot = (now - then for now, then in zip(_run_updates(), before, strict=True))
    assert (updates, hot) == (1, 1)
    assert Run.objects.get(pk=sent.run.id).status == "running"


def _foreign_keys(table: str) -> set[tuple[str, str]]:
    """(column, referenced table) of each foreign-key constraint of ``table``."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return {
        (info["columns"][0], info["foreign_key"][0])
        for info in constraints.values()
        if info["foreign_key"]
    }


def test_a_runs_steps_and_attempts_refer_to_it_without_a_constraint() -> None:
    run_table, thread_table = Run._meta.db_table, Thread._meta.db_table
    assert _foreign_keys(Message._meta.db_table) == {
        ("thread_id", thread_table),
        ("run_id", run_table),
    }
    assert _foreign_keys(Step._meta.db_table) == set()
    assert _foreign_keys(RunAttempt._meta.db_table) == set()
    assert ("thread_id", thread_table) in _foreign_keys(run_table)


def test_deleting_a_run_still_deletes_its_rows() -> None:
    """Django's ``on_delete`` cascades without the database constraint."""
    thread = services.create_thread(IDENTITY, agent="assistant")
    sent = services.send(IDENTITY, thread.id, USER, dispatch=False)
    assert sent.run is not None
    ORMThreadStore().claim_run_sync(sent.run.id, owner="w", lease_seconds=60)
    assert Message.objects.filter(run_id=sent.run.id).exists()
    assert RunAttempt.objects.filter(run_id=sent.run.id).exists()
    Run.objects.filter(pk=sent.run.id).delete()
    assert not Message.objects.filter(run_id=sent.run.id).exists()
    assert not RunAttempt.objects.filter(run_id=sent.run.id).exists()
