"""Conditions written with literal values, so SQLite can use a partial index.

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
from collections.abc import Iterable, Sequence
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BooleanField, Expression, F
from django.db.models.sql.compiler import SQLCompiler

__all__ = ["LiteralIn"]

_CONSTANT = re.compile(r"[a-z_]+")


class LiteralIn(Expression):
    """``field IN ('a', 'b')`` with the values inlined; usable in ``filter()`` and in an
    index's ``condition`` alike (same SQL text as ``Q(field__in=...)`` compiles to)."""

    conditional = True
    output_field = BooleanField()

    def __init__(self, field: str, values: Iterable[str]) -> None:
        super().__init__()
        self.values = tuple(str(value) for value in values)
        if not self.values or not all(_CONSTANT.fullmatch(value) for value in self.values):
            raise ValueError(f"LiteralIn takes choice constants only, not {self.values!r}")
        self.column: Any = F(field)

    def get_source_expressions(self) -> list[Any]:
        return [self.column]

    def set_source_expressions(self, exprs: Sequence[Any]) -> None:
        [self.column] = exprs

    def as_sql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper
    ) -> tuple[str, tuple[Any, ...]]:
        column, params = compiler.compile(self.column)
        if len(self.values) == 1:
            return f"{column} = '{self.values[0]}'", tuple(params)
        listed = ", ".join(f"'{value}'" for value in self.values)
        return f"{column} IN ({listed})", tuple(params)
