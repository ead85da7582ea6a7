"""The ORM store's statements: the lease predicate, and writes that return what they wrote.

The lease predicate is written once, here (:func:`lease_held`): every fenced write of the
ORM store and of the lifecycle facade checks it, as a ``Q`` (:func:`fence`,
:func:`held_runs`) or as the SQL it compiles to (:func:`held_exists_sql`). Its complement
for takeovers, :func:`lease_expired`, is what a claim and the sweeper look for.

Django's ``QuerySet.update()`` reports a row count only, so the store would have to read a
row back after writing it (and the realtime publisher once more). These helpers compile the
same UPDATE/INSERT with Django's own compilers (field adaptation, quoting) and add what the
ORM cannot express: ``RETURNING`` (SQLite >= 3.35 and PostgreSQL), scalar subqueries in it,
and, on PostgreSQL, data-modifying CTEs that make a fenced multi-row write one statement.
Returned values go through the fields' database converters, exactly as a SELECT's would.
INSERTs are built in :mod:`pai_threads.store.inserts`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any, TypeVar, cast

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import F, Field, Model, Q, QuerySet
from django.db.models.base import ModelState
from django.db.models.functions import Now
from django.db.models.sql import UpdateQuery
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from pai_agents.engine.store import LeaseLost
from pai_agents.lifecycle.backend import LeaseLike
from pai_threads.models import Message, PendingAction, QueueItem, Run

__all__ = [
    "MESSAGE_COLUMNS",
    "ReturnedRow",
    "claim_update_sql",
    "column_of",
    "convert",
    "fence",
    "fenced_update_sql",
    "held_exists_sql",
    "held_runs",
    "input_messages",
    "input_messages_sql",
    "lease_expired",
    "lease_held",
    "model_fields",
    "new_instance",
    "parts_update_sql",
    "pending_sql",
    "queued_sql",
    "returned_instance",
    "returning_sql",
    "update_sql",
]

ReturnedRow = dict[str, Any]

# The columns a client projection of a message needs (Message.to_ui_message).
MESSAGE_COLUMNS = (
    "id",
    "message_id",
    "thread_id",
    "run_id",
    "role",
    "parts",
    "metadata",
    "status",
    "producer",
    "relation",
    "usage",
    "diagnostics",
    "created_at",
    "updated_at",
)
# Embedded as JSON values (not as strings holding JSON) in SQLite's json_object().
_JSON_FIELDS = frozenset({"parts", "metadata", "usage", "diagnostics"})
_DATETIME_FIELDS = frozenset({"created_at", "updated_at"})


def lease_held(lease: LeaseLike, *, renewal: bool = False) -> Q:
    """The lease predicate: the write is made by the run's current lease holder (the run
    row still carries this execution's fencing token, the run is still running, and the
    lease has not expired by the database's clock: LC-033, a write after expiry is refused
    even before another worker takes over).

    ``renewal`` (the heartbeat only): an expired lease nobody took over yet may still be
    renewed by its holder; the token alone decides, and no other write is made with it."""
    if renewal:
        return Q(id=lease.run_id, lease_token=lease.token, status=Run.Status.RUNNING)
    return Q(
        id=lease.run_id,
        lease_token=lease.token,
        status=Run.Status.RUNNING,
        lease_expires_at__gt=Now(),
    )


def lease_expired(now: datetime) -> Q:
    """A running run whose lease ran out at ``now``: another claim may take it over."""
    return Q(status=Run.Status.RUNNING, lease_expires_at__lt=now)


def held_runs(lease: LeaseLike, *, renewal: bool = False) -> QuerySet[Run]:
    """The run row, if ``lease`` still holds it (for a fencing UPDATE)."""
    return Run.objects.filter(lease_held(lease, renewal=renewal))


def fence(lease: LeaseLike, **changes: Any) -> None:
    """Check (and lock) the lease inside the current transaction, applying ``changes``;
    :class:`LeaseLost` (before anything is written) when it no longer holds."""
    if held_runs(lease).update(**(changes or {"lease_token": F("lease_token")})) != 1:
        raise LeaseLost(lease.run_id)


def _lease_params(lease: LeaseLike) -> list[Any]:
    return [lease.run_id, lease.token, Run.Status.RUNNING.value]


@cache
def _held_where(vendor: str, renewal: bool = False) -> str:
    """:func:`lease_held` as the SQL the ORM compiles it to (tests compare the two)."""
    table = qn(Run._meta.db_table)
    if renewal:
        return (
            f"({table}.{qn('id')} = %s AND {table}.{qn('lease_token')} = %s "
            f"AND {table}.{qn('status')} = %s)"
        )
    compiler = Run.objects.all().query.get_compiler(connection=connection)
    now, _ = compiler.compile(Now())
    return (
        f"({table}.{qn('id')} = %s AND {table}.{qn('lease_expires_at')} > ({now}) "
        f"AND {table}.{qn('lease_token')} = %s AND {table}.{qn('status')} = %s)"
    )


@cache
def _held_exists(vendor: str) -> str:
    table = qn(Run._meta.db_table)
    sql = f"SELECT {table}.{qn('id')} AS {qn('pk')} FROM {table} WHERE {_held_where(vendor)}"  # noqa: S608
    if connection.features.has_select_for_update:
        sql += " " + connection.ops.for_update_sql(no_key=True)
    return f"EXISTS ({sql})"


def held_exists_sql(lease: LeaseLike) -> tuple[str, list[Any]]:
    """``EXISTS`` the run row held by ``lease``, locking it as a fencing UPDATE does (until
    the statement's commit). SQLite locks the whole database for any write: no lock clause."""
    return _held_exists(connection.vendor), _lease_params(lease)


@cache
def _fenced_update(vendor: str, shape: tuple[tuple[str, bool], ...], renewal: bool) -> str:
    table = qn(Run._meta.db_table)
    if shape:
        sets = ", ".join(f"{qn(name)} = {'NULL' if null else '%s'}" for name, null in shape)
    else:
        sets = f"{qn('lease_token')} = {table}.{qn('lease_token')}"
    return f"UPDATE {table} SET {sets} WHERE {_held_where(vendor, renewal)}"  # noqa: S608


def fenced_update_sql(
    lease: LeaseLike, changes: dict[str, Any], *, renewal: bool = False
) -> tuple[str, list[Any]]:
    """``held_runs(lease).update(**changes)`` as :func:`update_sql` compiles it (no changes:
    the no-op write that only takes the row lock), its text built once per set of columns.
    Values are prepared for the database as the ORM's update compiler does; an expression
    among them takes the ORM's own compiler."""
    if any(hasattr(value, "resolve_expression") for value in changes.values()):
        return update_sql(held_runs(lease, renewal=renewal), changes)
    conn = connections[DEFAULT_DB_ALIAS]
    shape = tuple((name, value is None) for name, value in changes.items())
    given = {name: value for name, value in changes.items() if value is not None}
    fields = model_fields(Run, tuple(given))
    params: list[Any] = [
        field.get_db_prep_save(value, connection=conn)
        for field, value in zip(fields, given.values(), strict=True)
    ]
    return _fenced_update(conn.vendor, shape, renewal), params + _lease_params(lease)


def model_fields(model: type[Model], names: Iterable[str]) -> tuple[Field[Any, Any], ...]:
    """Concrete fields by name (or attname), for RETURNING lists and :func:`convert`."""
    return tuple(cast("Field[Any, Any]", model._meta.get_field(name)) for name in names)


# The fields of the prebuilt statements below, looked up once.
_PARTS_FIELDS = model_fields(Message, ("parts", "updated_at"))
_CLAIM_TIME_FIELDS = model_fields(Run, ("lease_expires_at",))


# Statement text depends on the database vendor only, never on a call's values: built once
# per vendor. Reaching Django's ``connection`` proxy costs a thread-local lookup, which a
# statement built piece by piece paid a hundred times per step (docs/benchmarks.md, W1).


@cache
def _quoted(vendor: str, name: str) -> str:
    return connection.ops.quote_name(name)


def qn(name: str) -> str:
    return _quoted(connection.vendor, name)


@cache
def _column(vendor: str, table: str, name: str) -> str:
    return f"{qn(table)}.{qn(name)}"


def column_of(table: str, name: str) -> str:
    """``"table"."column"``, quoted for the database."""
    return _column(connection.vendor, table, name)


def update_sql(queryset: QuerySet[Any], changes: dict[str, Any]) -> tuple[str, list[Any]]:
    """``queryset.update(**changes)`` as SQL and parameters, not executed."""
    query = cast(UpdateQuery, queryset.query.chain(UpdateQuery))
    query.add_update_values(changes)
    sql, params = query.get_compiler(connection=connection).as_sql()
    return sql, list(params)


@cache
def _returning(vendor: str, fields: tuple[Field[Any, Any], ...], table: str) -> str:
    return ", ".join(f"{qn(table)}.{qn(str(f.column))}" for f in fields)


@cache
def _claim_update(vendor: str) -> str:
    table = qn(Run._meta.db_table)

    def col(name: str) -> str:
        return column_of(Run._meta.db_table, name)

    return (
        f"UPDATE {table} SET {qn('status')} = %s, {qn('lease_owner')} = %s, "  # noqa: S608
        f"{qn('lease_expires_at')} = %s, {qn('lease_token')} = ({col('lease_token')} + %s), "
        f"{qn('attempt')} = ({col('attempt')} + %s), "
        f"{qn('started_at')} = COALESCE({col('started_at')}, %s) "
        f"WHERE (({col('status')} = %s OR ({col('lease_expires_at')} < %s AND "
        f"{col('status')} = %s)) AND {col('id')} = %s)"
    )


def claim_update_sql(
    run_id: str, *, owner: str, expires: datetime, now: datetime
) -> tuple[str, list[Any]]:
    """The claim's conditional UPDATE (queued, or running with an expired lease: the token
    and attempt incremented), as the ORM compiles it, its text built once."""
    conn = connections[DEFAULT_DB_ALIAS]
    (moment,) = _CLAIM_TIME_FIELDS
    running, queued = Run.Status.RUNNING.value, Run.Status.QUEUED.value
    at = moment.get_db_prep_save(now, connection=conn)
    params = [running, owner, moment.get_db_prep_save(expires, connection=conn), 1, 1, at]
    return _claim_update(conn.vendor), [*params, queued, at, running, run_id]


@cache
def _parts_update(vendor: str) -> str:
    table = qn(Message._meta.db_table)
    return (
        f"UPDATE {table} SET {qn('parts')} = %s, {qn('updated_at')} = %s "  # noqa: S608
        f"WHERE ({table}.{qn('message_id')} = %s AND {table}.{qn('run_id')} = %s)"
    )


def parts_update_sql(
    run_id: str, message_id: str, parts: Any, now: datetime
) -> tuple[str, list[Any]]:
    """``UPDATE`` one message's parts (by run and message id), its text built once."""
    conn = connections[DEFAULT_DB_ALIAS]
    params = [
        f.get_db_prep_save(v, connection=conn)
        for f, v in zip(_PARTS_FIELDS, (parts, now), strict=True)
    ]
    return _parts_update(conn.vendor), [*params, message_id, run_id]


def returning_sql(fields: Sequence[Field[Any, Any]], table: str) -> str:
    return _returning(connection.vendor, tuple(fields), table)


@cache
def _converters(vendor: str, fields: tuple[Field[Any, Any], ...]) -> tuple[Any, ...]:
    """Per field: (attname, its column expression, the converters a SELECT would apply)."""
    out = []
    for field in fields:
        col = field.get_col(field.model._meta.db_table)
        converters = (*connection.ops.get_db_converters(col), *col.get_db_converters(connection))
        out.append((field.attname, col, converters))
    return tuple(out)


M = TypeVar("M", bound=Model)


def returned_instance(model: type[M], values: ReturnedRow) -> M:
    """A ``model`` instance of a row a statement returned: ``values`` (attname -> value, as
    :func:`convert` gives them) set as loaded, without ``Model.__init__``.

    ``__init__`` walks every field of the model (a default for each one not given) and
    sends ``pre_init``/``post_init``: 20-30 us per instance, and the hot path builds one per
    fencing write and per returned message (W1: -0.4 ms per run, 2.6%). A field not in
    ``values`` is deferred, as with ``.only()``: reading it loads it from the database
    (a default would have been a wrong value)."""
    obj = model.__new__(model)
    obj.__dict__.update(values)
    state = ModelState()
    state.adding = False
    state.db = DEFAULT_DB_ALIAS
    obj._state = state
    return obj


def new_instance(model: type[M], values: dict[str, Any]) -> M:
    """``model(**values)`` for a row about to be inserted, without ``Model.__init__``:
    ``values`` by attname (``run_id``, not ``run``), every other concrete field its default
    as ``__init__`` gives it (``field.get_default()``, a callable default called anew).

    The hot path's step commit builds its message and Step row only to insert them
    (20-30 us each through ``__init__``, which walks every field and sends
    ``pre_init``/``post_init``). A name that is not a concrete field's attname takes
    ``model(**values)``."""
    fields = _field_defaults(model)
    if not values.keys() <= fields.keys():
        return model(**values)
    obj = model.__new__(model)
    loaded = obj.__dict__
    for attname, field in fields.items():
        if attname not in values:
            loaded[attname] = field.get_default()
    loaded.update(values)
    obj._state = ModelState()
    return obj


@cache
def _field_defaults(model: type[Model]) -> dict[str, Field[Any, Any]]:
    """The fields ``__init__`` sets (a generated column, like ``Run.active``, it leaves
    deferred: the database computes it)."""
    fields = model._meta.concrete_fields
    return {f.attname: f for f in fields if f.column is not None and not f.generated}


def convert(fields: Sequence[Field[Any, Any]], values: Iterable[Any]) -> ReturnedRow:
    """Raw returned values as the ORM would give them (JSON decoded, aware datetimes)."""
    conn = connections[DEFAULT_DB_ALIAS]  # the wrapper itself, looked up once
    row: ReturnedRow = {}
    for (attname, col, converters), value in zip(
        _converters(conn.vendor, tuple(fields)), values, strict=False
    ):
        for converter in converters:
            value = converter(value, col, conn)
        row[attname] = value
    return row


@cache
def _thread_rows_exist(vendor: str, table_name: str, thread_column: str) -> str:
    """``EXISTS`` a row of ``table_name`` for the thread in ``thread_column``, by status."""
    table = qn(table_name)
    return (
        f"EXISTS (SELECT 1 FROM {table} WHERE {table}.{qn('thread_id')} = {thread_column} "  # noqa: S608
        f"AND {table}.{qn('status')} = %s)"
    )


def queued_sql(thread_column: str) -> tuple[str, list[Any]]:
    """``EXISTS`` queued input for the thread in ``thread_column`` (a qualified column)."""
    sql = _thread_rows_exist(connection.vendor, QueueItem._meta.db_table, thread_column)
    return sql, [QueueItem.Status.QUEUED.value]


def pending_sql(thread_column: str) -> tuple[str, list[Any]]:
    """``EXISTS`` a pending action for the thread in ``thread_column``."""
    sql = _thread_rows_exist(connection.vendor, PendingAction._meta.db_table, thread_column)
    return sql, [PendingAction.Status.PENDING.value]


@cache
def _input_messages(vendor: str, run_column: str) -> str:
    table = qn(Message._meta.db_table)
    where = (
        f"{table}.{qn('run_id')} = {run_column} AND {table}.{qn('relation')} = %s "
        f"AND {table}.{qn('in_transcript')}"
    )
    if vendor == "postgresql":
        pairs = ", ".join(f"'{name}', {table}.{qn(name)}" for name in MESSAGE_COLUMNS)
        return (
            f"(SELECT COALESCE(json_agg(json_build_object({pairs}) ORDER BY {table}.{qn('id')}), "  # noqa: S608
            f"'[]'::json) FROM {table} WHERE {where})"
        )
    pairs = ", ".join(
        f"'{name}', json({table}.{qn(name)})"
        if name in _JSON_FIELDS
        else f"'{name}', {table}.{qn(name)}"
        for name in MESSAGE_COLUMNS
    )
    return f"(SELECT json_group_array(json_object({pairs})) FROM {table} WHERE {where})"  # noqa: S608


def input_messages_sql(run_column: str) -> tuple[str, list[Any]]:
    """A scalar subquery: the run's transcript input messages as one JSON array."""
    return _input_messages(connection.vendor, run_column), [Message.Relation.INPUT.value]


def input_messages(value: Any) -> list[Message]:
    """The rows of :func:`input_messages_sql`'s array, in thread order."""
    items = json.loads(value) if isinstance(value, str | bytes) else (value or [])
    rows: list[Message] = []
    for item in items:
        for name in _DATETIME_FIELDS:
            moment = parse_datetime(item[name]) if isinstance(item[name], str) else item[name]
            if moment is not None and timezone.is_naive(moment):
                moment = timezone.make_aware(moment, UTC)  # SQLite stores naive UTC text
            item[name] = moment
        rows.append(returned_instance(Message, item))
    rows.sort(key=lambda row: row.pk)
    return rows
