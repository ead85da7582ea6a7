"""Conditions written so that the planners use the indexes the queries were built for.

``LiteralIn``: conditions written with literal values, so SQLite can use a partial index.

SQLite uses a partial index only when the query's WHERE clause implies the index's
condition term for term. It compares a bound parameter with its value for ``status = ?``,
but not inside an IN list: ``status IN (?, ?, ?)`` does not match ``WHERE status IN
('queued', 'running', 'waiting')``, so the planner falls back to another index and scans
(measured: the active-run lookup of a send read all 5,000 runs of a 10,000-message thread,
1.9 ms instead of 0.06 ms). PostgreSQL plans with the values either way. The values are
the models' own choice constants, never user input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, TypeVar

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F, Model, QuerySet
from django.db.models.lookups import Lookup
from django.db.models.sql.compiler import SQLCompiler

__all__ = ["LiteralIn", "in_thread_order"]

M = TypeVar("M", bound=Model)

_CONSTANT = re.compile(r"[a-z_]+")


class LiteralIn(Lookup):
    """``field IN ('a', 'b')`` with the values inlined; usable in ``filter()`` and in an
    index's ``condition`` alike (same SQL text as ``Q(field__in=...)`` compiles to).

    A lookup, so that ``filter()`` puts it in the WHERE clause as it is on every Django
    version: Django 6 compares any other conditional expression with ``= True`` on a
    database without a native boolean type (SQLite), and SQLite's partial-index matching
    then no longer sees the index's own condition."""

    lookup_name = "literal_in"  # never registered: built directly, as LiteralIn(...)

    def __init__(self, field: str, values: Iterable[str]) -> None:
        self.values = tuple(str(value) for value in values)
        if not self.values or not all(_CONSTANT.fullmatch(value) for value in self.values):
            raise ValueError(f"LiteralIn takes choice constants only, not {self.values!r}")
        super().__init__(F(field), self.values)

    def as_sql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper
    ) -> tuple[str, tuple[Any, ...]]:
        column, params = compiler.compile(self.lhs)
        if len(self.values) == 1:
            return f"{column} = '{self.values[0]}'", tuple(params)
        listed = ", ".join(f"'{value}'" for value in self.values)
        return f"{column} IN ({listed})", tuple(params)


def in_thread_order(rows: QuerySet[M], thread_id: str, *, descending: bool = False) -> QuerySet[M]:
    """``rows.filter(thread_id=...).order_by("id")`` (or ``"-id"``), planned on the
    ``(thread_id, id)`` indexes however old or new the thread is.

    PostgreSQL plans ``thread_id = X ORDER BY id DESC LIMIT n`` as a backward scan of the
    primary key, assuming the thread's rows are spread evenly over the table: for a thread
    older than most of the table's rows it filters every newer message of every other thread
    first (23 ms behind 100,000 newer messages, growing with the table; the oldest-first read
    of a new thread alike). Written as the range ``X <= thread_id <= X`` ordered by
    ``(thread_id, id)``, only the ``(thread_id, id)`` indexes give the order, and the read
    starts at the thread's own end (0.1 ms). SQLite already plans the plain form on them."""
    if connection.vendor == "postgresql":
        rows = rows.filter(thread_id__gte=thread_id, thread_id__lte=thread_id)
        order: tuple[str, ...] = ("-thread_id", "-id") if descending else ("thread_id", "id")
    else:
        rows = rows.filter(thread_id=thread_id)
        order = ("-id",) if descending else ("id",)
    return rows.order_by(*order)
