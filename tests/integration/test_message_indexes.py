"""The message table's indexes after the migrations: MF-043's partial unique index stands,
and no plain index duplicates the leading column of ``pai_msg_thread_position``."""

from __future__ import annotations

import pytest
from django.db import connection

from pai_threads.models import Message

pytestmark = pytest.mark.django_db


def _indexes() -> dict[str, dict[str, object]]:
    with connection.cursor() as cursor:
        return connection.introspection.get_constraints(cursor, Message._meta.db_table)


def test_mf_043_the_one_open_message_index_survives_the_index_pruning() -> None:
    indexes = _indexes()
    assert indexes["pai_one_open_message"]["unique"] is True
    assert indexes["pai_one_open_message"]["columns"] == ["thread_id"]


def test_no_plain_index_repeats_the_thread_position_index() -> None:
    """Every message write maintains each index (WAL): ``(thread_id)`` alone is covered by
    ``pai_msg_thread_position (thread_id, id)``."""
    plain = [
        name
        for name, info in _indexes().items()
        if info["columns"] == ["thread_id"] and info["index"] and not info["unique"]
    ]
    assert plain == []
    assert _indexes()["pai_msg_thread_position"]["columns"] == ["thread_id", "id"]


def _indexes_of(table: str) -> dict[str, dict[str, object]]:
    with connection.cursor() as cursor:
        return connection.introspection.get_constraints(cursor, table)


def _plain_on(table: str, columns: list[str]) -> list[str]:
    return sorted(
        name
        for name, info in _indexes_of(table).items()
        if info["columns"] == columns
        and info["index"]
        and not info["unique"]
        and not info["primary_key"]
    )


def test_run_and_step_writes_maintain_no_redundant_index() -> None:
    """Migration 0008 (issue 16): one index per access path, the invariants' kept."""
    assert _plain_on("pai_threads_run", ["thread_id"]) == []
    assert _plain_on("pai_threads_run", ["id"]) == []
    assert _plain_on("pai_threads_step", ["run_id"]) == []
    # 0014: the run's messages through the unique (run, step_index) rule, no index of their own.
    assert _plain_on("pai_threads_message", ["run_id"]) == []
    per_step = _indexes_of("pai_threads_message")["pai_one_message_per_step"]
    assert per_step["columns"] == ["run_id", "step_index"] and per_step["unique"] is True
    run = _indexes_of("pai_threads_run")
    assert run["pai_one_active_run_per_thread"]["unique"] is True
    assert run["pai_run_thread_created"]["columns"] == ["thread_id", "created_at"]
    assert _indexes_of("pai_threads_step")["pai_step_index_per_run"]["columns"] == [
        "run_id",
        "index",
    ]


def test_no_run_index_names_the_status_and_a_thread_id_has_no_pattern_twin() -> None:
    """Migration 0018 (issue 16): the run's indexes name the computed ``active`` column,
    never ``status``, so a claim (queued -> running) can be a heap-only update; migration
    0014: thread ids have no ``varchar_pattern_ops`` twin on PostgreSQL."""
    run = _indexes_of("pai_threads_run")
    assert "pai_run_status_lease" not in run
    indexed = [name for name, info in run.items() if info["index"] or info["unique"]]
    assert not [name for name in indexed if "status" in (run[name]["columns"] or [])]
    assert _plain_on("pai_threads_thread", ["id"]) == []
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'pai_one_active_run_per_thread'"
            )
        else:
            cursor.execute(
                "SELECT sql FROM sqlite_master WHERE name = 'pai_one_active_run_per_thread'"
            )
        (definition,) = cursor.fetchone()
    condition = definition.split("WHERE", 1)[1]
    assert "active" in condition and "status" not in condition


def test_a_message_writes_no_index_another_covers() -> None:
    """Migration 0016 (issue 16): the transcript reads walk the thread position index (no
    partial twin of it); the context keeps its partial index
    (tests/integration/test_lean_index_plans.py)."""
    on_position = sorted(
        name
        for name, info in _indexes_of("pai_threads_message").items()
        if info["columns"] == ["thread_id", "id"]
    )
    assert on_position == ["pai_msg_context", "pai_msg_thread_position"]


def test_a_run_row_version_writes_no_scope_index() -> None:
    """Migration 0017 (issue 16): a scope's runs are its threads' runs (the budget check
    reads them through the thread indexes, tests/integration/test_lean_index_plans.py)."""
    assert not [
        name
        for name, info in _indexes_of("pai_threads_run").items()
        if "scope_key" in info["columns"]
    ]
