"""INSERT statements built once per shape, their values prepared as the ORM prepares them.

``Model.objects.create()`` compiles its INSERT afresh each time; the hot path's inserts (a
send's run and message, a step's message and Step row, a claim's attempt) take their text
from here, built once per model and shape, with the values prepared field by field. With a
``source`` the row is selected from a fencing CTE (PostgreSQL's data-modifying statements).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import (
    BooleanField,
    CharField,
    Field,
    ForeignKey,
    IntegerField,
    Model,
    TextField,
)
from django.db.models.sql import InsertQuery

from pai_threads.store.sql import qn, returning_sql

__all__ = ["compiled_insert_sql", "insert_sql"]


def insert_sql(
    obj: Model,
    *,
    source: str | None = None,
    columns: dict[str, str] | None = None,
    returning: Sequence[Field[Any, Any]] = (),
) -> tuple[str, list[Any]]:
    """``INSERT`` of ``obj`` (an auto-increment key left to the database), not executed.

    Values are prepared as Django's insert compiler prepares them (``pre_save`` fills
    ``auto_now`` values into ``obj``); the statement's text is built once per shape. With
    ``source`` the row is ``SELECT``ed from it instead of ``VALUES``: it is inserted only if
    ``source`` (a fencing CTE) has a row. ``columns`` maps attnames to SQL expressions over
    ``source`` (a key inserted by an earlier CTE).
    """
    columns = columns or {}
    conn = connections[DEFAULT_DB_ALIAS]
    params: list[Any] = []
    for field, plain in _insert_plan(type(obj)):
        if field.attname in columns:
            continue
        if plain:
            # A string, number or flag its field takes as it is: the parameter itself (what
            # ``get_db_prep_save`` returns for it, without the five calls it takes).
            value = getattr(obj, field.attname)
            if type(value) in plain:
                params.append(value)
                continue
        else:
            value = field.pre_save(obj, add=True)
        if hasattr(value, "resolve_expression") or hasattr(field, "get_placeholder"):
            return compiled_insert_sql(obj, source=source, columns=columns, returning=returning)
        params.append(field.get_db_prep_save(value, connection=conn))
    shape = (type(obj), source, tuple(sorted(columns.items())), tuple(returning))
    return _insert_text(conn.vendor, *shape), params


# Field classes whose ``get_db_prep_save`` returns a value of these exact types unchanged on
# SQLite and PostgreSQL (the databases PAI runs on), and whose ``pre_save`` only reads it.
_PLAIN_VALUES: tuple[tuple[type[Field[Any, Any]], frozenset[type]], ...] = (
    (CharField, frozenset({str, type(None)})),
    (TextField, frozenset({str, type(None)})),
    (IntegerField, frozenset({int, type(None)})),
    (BooleanField, frozenset({bool, type(None)})),
)


def _plain_types(field: Field[Any, Any]) -> frozenset[type]:
    if hasattr(field, "get_placeholder") or type(field).pre_save is not Field.pre_save:
        return frozenset()
    if isinstance(field, ForeignKey):  # its target field prepares the key
        target = field.target_field
        types = _plain_types(target)
        # A key of "" is NULL unless the target takes empty strings: not passed through.
        return types if target.empty_strings_allowed else types - {str}
    for kind, types in _PLAIN_VALUES:
        if isinstance(field, kind):
            return types
    return frozenset()


@cache
def _insert_plan(model: type[Model]) -> tuple[tuple[Field[Any, Any], frozenset[type]], ...]:
    """Per inserted field: the field, and the value types passed through as parameters."""
    return tuple((field, _plain_types(field)) for field in _insert_fields(model))


@cache
def _insert_fields(model: type[Model]) -> tuple[Field[Any, Any], ...]:
    """Every concrete field but a database-generated primary key (a default-made one, like a
    run's id, is inserted) and the columns the database computes (``Run.active``)."""
    auto = model._meta.auto_field
    return tuple(f for f in model._meta.local_concrete_fields if f is not auto and not f.generated)


@cache
def _insert_text(
    vendor: str,
    model: type[Model],
    source: str | None,
    columns: tuple[tuple[str, str], ...],
    returning: tuple[Field[Any, Any], ...],
) -> str:
    given = dict(columns)
    fields = _insert_fields(model)
    values = ", ".join(given.get(f.attname, "%s") for f in fields)
    return _insert_statement(model, fields, values, source, returning)


def _insert_statement(
    model: type[Model],
    fields: Sequence[Field[Any, Any]],
    values: str,
    source: str | None,
    returning: Sequence[Field[Any, Any]],
) -> str:
    table = qn(model._meta.db_table)
    names = ", ".join(qn(str(f.column)) for f in fields)
    if source is None:
        sql = f"INSERT INTO {table} ({names}) VALUES ({values})"  # noqa: S608
    else:
        sql = f"INSERT INTO {table} ({names}) SELECT {values} FROM {source}"  # noqa: S608
    if returning:
        sql += f" RETURNING {returning_sql(returning, model._meta.db_table)}"
    return sql


def compiled_insert_sql(
    obj: Model,
    *,
    source: str | None = None,
    columns: dict[str, str] | None = None,
    returning: Sequence[Field[Any, Any]] = (),
) -> tuple[str, list[Any]]:
    """:func:`insert_sql` by Django's insert compiler, field by field: for values that are
    expressions and fields with their own placeholders (and to compare with in tests)."""
    fields = list(_insert_fields(type(obj)))
    query = InsertQuery(type(obj))
    query.insert_values(fields, [obj])
    compiler = query.get_compiler(connection=connection)
    columns = columns or {}
    values: list[str] = []
    params: list[Any] = []
    for field in fields:
        if field.attname in columns:
            values.append(columns[field.attname])
            continue
        value = compiler.prepare_value(field, compiler.pre_save_val(field, obj))
        sql, field_params = compiler.field_as_sql(
            field, getattr(field, "get_placeholder", None), value
        )
        values.append(sql)
        params += field_params
    return _insert_statement(type(obj), fields, ", ".join(values), source, returning), params
