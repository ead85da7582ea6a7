"""Reading threads back from JSON Lines: all of it in one transaction, or nothing.

Every line is checked before the first write (format, version, completeness, each row
against its model, the rows' references among themselves, file bytes against their size
and digest); ids are kept, so a row that already exists is an :class:`ImportConflict` and
the transaction rolls back. ``scope`` rewrites every row's ``scope_key``: the threads move
to another partition. A file the database already holds unchanged (same id, scope and
digest, bound to no thread) is shared rather than a conflict: uploads of a scope can be
referenced by several threads exported one by one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, connection, transaction
from django.db.models import DateTimeField, Model

from pai_threads.models import File, Message, RunAttempt, Step, Thread
from pai_threads.operations.portability.records import (
    FORMAT,
    KINDS,
    VERSION,
    ExportFormatError,
    ImportConflict,
    row_values,
)

__all__ = ["ImportSummary", "import_threads"]


@dataclass(slots=True)
class ImportSummary:
    dry_run: bool
    threads: list[str] = field(default_factory=list)
    scope: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    shared_files: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "threads": self.threads,
            "scope": self.scope,
            "counts": self.counts,
            "sharedFiles": self.shared_files,
        }


@dataclass(slots=True)
class _Parsed:
    threads: list[str]
    rows: dict[str, list[dict[str, Any]]]
    content: dict[str, bytes]


class _DryRun(Exception):
    """Rolls a dry run's inserts back."""


def _json(line: str, number: int) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError:
        raise ExportFormatError("not a JSON record", number) from None
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        raise ExportFormatError("a record is an object with a string 'type'", number)
    return record


def _header(record: dict[str, Any], number: int) -> list[str]:
    if record["type"] != "header" or record.get("format") != FORMAT:
        raise ExportFormatError(f"the first line is not a {FORMAT} header", number)
    if record.get("version") != VERSION:
        raise ExportFormatError(
            f"export version {record.get('version')!r} is not supported (this one reads "
            f"version {VERSION})",
            number,
        )
    threads = record.get("threads")
    if not isinstance(threads, list) or not all(isinstance(t, str) for t in threads):
        raise ExportFormatError("the header's 'threads' must be a list of ids", number)
    return threads


def _content(record: dict[str, Any], values: dict[str, Any], number: int) -> bytes:
    try:
        raw = base64.b64decode(str(record.get("content", "")), validate=True)
    except (binascii.Error, ValueError):
        raise ExportFormatError("file content is not base64", number) from None
    if len(raw) != values["byte_size"] or hashlib.sha256(raw).hexdigest() != values["sha256"]:
        raise ExportFormatError(f"file {values['id']}: content does not match its digest", number)
    return raw


def _parse(lines: Iterable[str]) -> _Parsed:
    parsed = _Parsed(threads=[], rows={kind: [] for kind in KINDS}, content={})
    count, ended, started = 0, False, False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if ended:
            raise ExportFormatError("records after the end record", number)
        record = _json(line, number)
        if not started:
            parsed.threads, started = _header(record, number), True
            continue
        kind = record["type"]
        if kind == "end":
            if record.get("records") != count:
                raise ExportFormatError(
                    f"the end record counts {record.get('records')!r} "
                    f"records, the file has {count}",
                    number,
                )
            ended = True
            continue
        if kind not in KINDS:
            raise ExportFormatError(f"unknown record type {kind!r}", number)
        values = row_values(kind, record.get("data"), number)
        if kind == "file":
            parsed.content[values["id"]] = _content(record, values, number)
        parsed.rows[kind].append(values)
        count += 1
    if not started:
        raise ExportFormatError("the input is empty")
    if not ended:
        raise ExportFormatError("truncated: the end record is missing")
    _check_references(parsed)
    return parsed


def _check_references(parsed: _Parsed) -> None:
    """Each row belongs to an exported thread and refers only to exported rows."""
    threads = {row["id"] for row in parsed.rows["thread"]}
    if sorted(threads) != sorted(parsed.threads) or len(threads) != len(parsed.rows["thread"]):
        raise ExportFormatError("the thread records do not match the header's threads")
    runs = {row["id"] for row in parsed.rows["run"]}
    messages = {row["id"] for row in parsed.rows["message"]}
    known = {"thread_id": threads, "run_id": runs, "message_id": messages}
    for kind in KINDS:
        model = KINDS[kind]
        for row in parsed.rows[kind]:
            for name, ids in known.items():
                fk = model._meta.concrete_fields
                if not any(f.attname == name and f.is_relation for f in fk):
                    continue
                if row[name] is not None and row[name] not in ids:
                    raise ExportFormatError(f"{kind} refers to {name} {row[name]!r}, not exported")
    for kind, rows in parsed.rows.items():
        keys = [row[KINDS[kind]._meta.pk.attname] for row in rows]
        if len(set(keys)) != len(keys):
            raise ExportFormatError(f"{kind} ids repeat")


def _shared_files(parsed: _Parsed, summary: ImportSummary) -> None:
    """Drop file rows the database already holds unchanged (unbound uploads of the scope)."""
    rows = parsed.rows["file"]
    existing = {
        f.id: f for f in File.objects.filter(id__in=[r["id"] for r in rows], thread__isnull=True)
    }
    kept = []
    for row in rows:
        have = existing.get(row["id"])
        same = have is not None and row["thread_id"] is None
        if same and (have.scope_key, have.sha256) == (row["scope_key"], row["sha256"]):  # type: ignore[union-attr]
            summary.shared_files.append(row["id"])
        else:
            kept.append(row)
    parsed.rows["file"] = kept


def _conflicts(parsed: _Parsed) -> None:
    for kind, rows in parsed.rows.items():
        model = KINDS[kind]
        keys = [row[model._meta.pk.attname] for row in rows]
        taken = list(model._default_manager.filter(pk__in=keys).values_list("pk", flat=True)[:5])
        if taken:
            shown = ", ".join(str(pk) for pk in taken)
            raise ImportConflict(f"{kind} rows already exist ({shown}): nothing was imported")


def _store_bytes(parsed: _Parsed, saved: list[str]) -> None:
    for row in parsed.rows["file"]:
        name = default_storage.save(row["storage_name"], ContentFile(parsed.content[row["id"]]))
        saved.append(name)
        row["storage_name"] = name  # the storage may pick another name if it is taken


def _insert(parsed: _Parsed) -> None:
    for kind, rows in parsed.rows.items():
        model = KINDS[kind]
        objects = [model(**row) for row in rows]
        model._default_manager.bulk_create(objects)
        # bulk_create stamps auto_now(_add) columns with now; put the exported moments back
        # (bulk_update leaves them as given).
        stamped = [
            f.name
            for f in model._meta.concrete_fields
            if isinstance(f, DateTimeField) and (f.auto_now or f.auto_now_add)
        ]
        if stamped and objects:
            for obj, row in zip(objects, rows, strict=True):
                for name in stamped:  # pre_save set the attribute too
                    setattr(obj, name, row[name])
            model._default_manager.bulk_update(objects, stamped)
    _advance_sequences([Message, Step, RunAttempt])


# Moves a table's id sequence past its largest id, never back (concurrent inserts hold
# later values already).
_SETVAL = (
    "SELECT setval(pg_get_serial_sequence(%s, 'id'), GREATEST("
    "(SELECT COALESCE(MAX(id), 1) FROM {table}), nextval(pg_get_serial_sequence(%s, 'id'))))"
)


def _advance_sequences(models: list[type[Model]]) -> None:
    """Explicit integer ids leave PostgreSQL's sequences behind: move them past the rows
    (never back). SQLite's AUTOINCREMENT follows inserted ids by itself."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for model in models:
            table = model._meta.db_table  # the model's own table name, never input
            sql = _SETVAL.format(table=connection.ops.quote_name(table))
            cursor.execute(sql, [table, table])


def import_threads(
    lines: Iterable[str], *, scope: str | None = None, dry_run: bool = False
) -> ImportSummary:
    """Import an export whole in one transaction (``dry_run``: check and roll back, no bytes
    stored). ExportFormatError for bad input, ImportConflict for existing ids."""
    if scope is not None:
        try:
            scope = Thread._meta.get_field("scope_key").clean(scope, None)
        except ValidationError as exc:
            raise ExportFormatError(f"scope: {'; '.join(exc.messages)}") from None
    parsed = _parse(lines)
    if scope is not None:
        for rows in parsed.rows.values():
            for row in rows:
                if "scope_key" in row:
                    row["scope_key"] = scope
    summary = ImportSummary(dry_run=dry_run, threads=parsed.threads, scope=scope)
    saved: list[str] = []
    try:
        with transaction.atomic():
            _shared_files(parsed, summary)
            _conflicts(parsed)
            summary.counts = {kind: len(rows) for kind, rows in parsed.rows.items()}
            if not dry_run:
                _store_bytes(parsed, saved)
            try:
                _insert(parsed)
            except IntegrityError as exc:
                raise ImportConflict(f"the rows conflict with stored ones: {exc}") from None
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass
    except BaseException:
        for name in saved:  # no rows, no orphan bytes
            default_storage.delete(name)
        raise
    return summary
