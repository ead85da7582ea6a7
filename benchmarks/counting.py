"""Counting SQL statements and transactions from inside Django, on every thread.

Runs execute their store calls through ``sync_to_async(thread_sensitive=False)``, so the
queries happen on executor threads, each with its own connection: a ``CaptureQueriesContext``
on the main thread would see none of them. Instead an execute wrapper is installed on every
connection as it is created (``connection_created``) and observes the run loops' own
connections (``observe_statements``), and ``BaseDatabaseWrapper.commit`` /
``rollback`` are wrapped to count explicit transactions. A statement outside any transaction
(autocommit) that writes (a data-modifying CTE included) is its own transaction, so it
counts as a commit too.

Django issues ``BEGIN`` and ``COMMIT`` through the driver, never as SQL, so the wrapper does
not see them; :attr:`Counts.pg_statements` adds them back (one ``BEGIN`` and one ``COMMIT``
per explicit transaction) to compare with pg_stat_statements, which does count them.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

from pai_threads.store.loop_connections import observe_statements

__all__ = ["Counts", "QueryCounter", "install"]

_WRITE = re.compile(
    # A plain write, or a data-modifying CTE (``WITH x AS (UPDATE ...) ...``, PostgreSQL).
    r"^\s*(INSERT|UPDATE|DELETE|REPLACE)\b|^\s*WITH\b.*?\bAS\s*\(\s*(INSERT|UPDATE|DELETE)\b",
    re.IGNORECASE | re.DOTALL,
)
# SQLite's backend opens ``transaction_mode`` transactions with SQL through the cursor.
_BEGIN = re.compile(r"^\s*BEGIN\b", re.IGNORECASE)


@dataclass
class Counts:
    """A snapshot (or a difference of snapshots) of what the counter saw."""

    statements: int = 0  # application statements, BEGIN excluded on every backend
    begins: int = 0
    commits: int = 0
    rollbacks: int = 0
    autocommit_writes: int = 0
    by_sql: Counter[str] = field(default_factory=Counter)

    @property
    def transactions(self) -> int:
        """Durable commits: explicit COMMITs plus writes that committed on their own."""
        return self.commits + self.autocommit_writes

    @property
    def pg_statements(self) -> int:
        """Statements as pg_stat_statements counts them: plus BEGIN and COMMIT/ROLLBACK."""
        return self.statements + 2 * (self.commits + self.rollbacks)

    def __sub__(self, other: Counts) -> Counts:
        return Counts(
            statements=self.statements - other.statements,
            begins=self.begins - other.begins,
            commits=self.commits - other.commits,
            rollbacks=self.rollbacks - other.rollbacks,
            autocommit_writes=self.autocommit_writes - other.autocommit_writes,
            by_sql=self.by_sql - other.by_sql,
        )


class QueryCounter:
    """Process-wide, thread-safe statement and transaction counts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = Counts()

    def snapshot(self) -> Counts:
        with self._lock:
            c = self._counts
            return Counts(
                statements=c.statements,
                begins=c.begins,
                commits=c.commits,
                rollbacks=c.rollbacks,
                autocommit_writes=c.autocommit_writes,
                by_sql=Counter(c.by_sql),
            )

    def __call__(
        self,
        execute: Callable[..., Any],
        sql: str,
        params: Any,
        many: bool,
        context: dict[str, Any],
    ) -> Any:
        connection = context["connection"]
        autocommit_write = (
            not connection.in_atomic_block
            and connection.get_autocommit()
            and bool(_WRITE.match(sql))
        )
        begin = bool(_BEGIN.match(sql))
        with self._lock:
            if begin:
                self._counts.begins += 1
            else:
                self._counts.statements += 1
            self._counts.by_sql[sql] += 1
            if autocommit_write:
                self._counts.autocommit_writes += 1
        return execute(sql, params, many, context)

    def count_loop_statement(self, sql: str) -> None:
        """A statement of a run loop's own connection (pai_threads.store.loop_connections):
        always autocommit, so a write is its own transaction."""
        with self._lock:
            self._counts.statements += 1
            self._counts.by_sql[sql] += 1
            if _WRITE.match(sql):
                self._counts.autocommit_writes += 1

    def _count_end(self, committed: bool) -> None:
        with self._lock:
            if committed:
                self._counts.commits += 1
            else:
                self._counts.rollbacks += 1

    def _on_connection_created(self, sender: Any, connection: Any, **_: Any) -> None:
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)


_installed: QueryCounter | None = None


def install() -> QueryCounter:
    """Install the process-wide counter (idempotent); call before any connection opens."""
    global _installed
    if _installed is not None:
        return _installed
    counter = QueryCounter()
    connection_created.connect(counter._on_connection_created, weak=False)
    observe_statements(counter.count_loop_statement)
    original_commit = BaseDatabaseWrapper.commit
    original_rollback = BaseDatabaseWrapper.rollback

    def commit(self: BaseDatabaseWrapper) -> None:
        original_commit(self)
        counter._count_end(committed=True)

    def rollback(self: BaseDatabaseWrapper) -> None:
        original_rollback(self)
        counter._count_end(committed=False)

    BaseDatabaseWrapper.commit = commit  # type: ignore[method-assign]
    BaseDatabaseWrapper.rollback = rollback  # type: ignore[method-assign]
    _installed = counter
    return counter
