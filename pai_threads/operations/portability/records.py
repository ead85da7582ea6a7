"""The JSON Lines format of an exported thread: one typed record per line.

The first line is the header (``{"type": "header", "format": "pai-threads", "version": 1,
...}``), the last the end record (``{"type": "end", "records": N}``, N the records between
them): a file cut short has no end and is refused whole. Between them, per thread, the
``thread`` record and its rows, parents before children: ``run``, ``run_attempt``,
``message``, ``step``, ``queue_item``, ``pending_action``, ``file`` (its stored bytes in
``content``, base64). A row record is ``{"type", "data"}``; ``data`` holds every column of
the row by its attribute name (``thread_id``, not ``thread``): the format follows the
models. A column added later with a default is additive (``ADDED_COLUMNS``: an older
file's rows take the default); a version bump marks an incompatible change.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from django.core.exceptions import ValidationError
from django.db.models import Field, ForeignKey, JSONField, Model

from pai_threads.models import (
    File,
    Message,
    PendingAction,
    QueueItem,
    Run,
    RunAttempt,
    Step,
    Thread,
)

__all__ = [
    "ADDED_COLUMNS",
    "FORMAT",
    "KINDS",
    "VERSION",
    "ExportFormatError",
    "ImportConflict",
    "PortabilityError",
    "row_data",
    "row_values",
    "stored_fields",
]

FORMAT: Final = "pai-threads"
VERSION: Final = 1
#: Columns added to a kind after version 1's files were first written, each with a model
#: default: a row without one takes the default (a file written before the column existed).
ADDED_COLUMNS: Final[Mapping[str, frozenset[str]]] = {
    "pending_action": frozenset({"sequence"}),  # migration 0013: suspension episodes
    "thread": frozenset({"parent_run_id"}),  # migration 0015: sub-agents
    "run": frozenset({"parent_run_id", "parent_tool_call_id"}),
}

# Record type -> model, in the order rows are written and inserted (parents first).
KINDS: Final[dict[str, type[Model]]] = {
    "thread": Thread,
    "run": Run,
    "run_attempt": RunAttempt,
    "message": Message,
    "step": Step,
    "queue_item": QueueItem,
    "pending_action": PendingAction,
    "file": File,
}


class PortabilityError(ValueError):
    """Base class of export and import errors; nothing was written when one is raised."""


class ExportFormatError(PortabilityError):
    """The input is not a complete export of a supported version (malformed, truncated,
    wrong version, a row that does not fit its model). ``line`` is 1-based, or None."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line


class ImportConflict(PortabilityError):
    """A row of the export already exists in the database (same id)."""


def stored_fields(model: type[Model]) -> list[Field[Any, Any]]:
    """The columns an export carries: every concrete field but those the database computes
    (``Run.active``), which an import cannot write and the database fills in again."""
    return [f for f in model._meta.concrete_fields if not f.generated]


def row_data(row: Model) -> dict[str, Any]:
    """Every stored column of ``row`` by attribute name, JSON-ready (datetimes in ISO 8601)."""
    data: dict[str, Any] = {}
    for field in stored_fields(type(row)):
        value = field.value_from_object(row)
        data[field.attname] = value.isoformat() if isinstance(value, datetime) else value
    return data


def _value(field: Field[Any, Any], value: Any) -> Any:
    if isinstance(field, JSONField):
        if value is None and not field.null:
            raise ValidationError("may not be null")
        return value
    if isinstance(field, ForeignKey):
        return None if value is None else field.target_field.to_python(value)
    if value is None and field.null:
        return None
    if isinstance(value, dict | list):
        raise ValidationError("must be a scalar")
    return field.clean(value, None)


def row_values(kind: str, data: object, line: int) -> dict[str, Any]:
    """The checked column values of one row record; ExportFormatError if any is wrong."""
    model = KINDS[kind]
    if not isinstance(data, Mapping):
        raise ExportFormatError(f"a {kind} record needs a 'data' object", line)
    fields = {f.attname: f for f in stored_fields(model)}
    # Columns added since version 1 was first written (additive): an older file's rows
    # take their defaults. Any other missing column, or one this version does not know,
    # is an error.
    added = ADDED_COLUMNS.get(kind, frozenset()) - set(data)
    data = {**{name: fields[name].get_default() for name in added}, **data}
    missing, unknown = set(fields) - set(data), set(data) - set(fields)
    if missing or unknown:
        raise ExportFormatError(
            f"{kind} columns differ from this version's: missing {sorted(missing)}, "
            f"unknown {sorted(unknown)}",
            line,
        )
    values: dict[str, Any] = {}
    for name, field in fields.items():
        try:
            values[name] = _value(field, data[name])
        except ValidationError as exc:
            raise ExportFormatError(f"{kind}.{name}: {'; '.join(exc.messages)}", line) from None
    return values
