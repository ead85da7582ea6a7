"""``manage.py pai_export`` / ``pai_import`` (issue 12, point 4): a thread with tool calls, an
answered and a pending approval, queued input, attachments (bytes through the storage),
attempts and usage travels as JSON Lines and comes back exactly, every row field by field
and ids included, into a freshly flushed database or another scope; bad input is a typed
error and imports nothing."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from pai_threads import services
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import File, Message, PendingAction, QueueItem, Run, RunAttempt, Thread
from pai_threads.operations.portability import (
    ExportFormatError,
    ImportConflict,
    export_threads,
    import_threads,
)
from pai_threads.operations.portability.records import KINDS, row_data
from pai_threads.services.files import upload_file

pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "user:exporter"
NOTE = b"meeting notes: ship on friday\n"


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "media"
    settings.MEDIA_ROOT = str(root)
    settings.PAI = {
        **settings.PAI,
        "AGENTS": [*settings.PAI["AGENTS"], "tests.support.agents.toolbox"],
    }
    yield root


def _send(identity: Identity, thread_id: str, text: str, *parts: dict[str, Any]) -> Run | None:
    message = {"role": "user", "parts": [{"type": "text", "text": text}, *parts]}
    sent = services.send(identity, thread_id, message, dispatch=False)
    if sent.run is not None and sent.run.status == "queued":
        asyncio.run(aexecute_run(sent.run.id))
    return sent.run


@pytest.fixture
def thread() -> Thread:
    """Tool calls, an approved call, a pending approval, queued input, two attachments."""
    identity = Identity(scope_key=SCOPE, data={"userId": "exporter"})
    thread = services.create_thread(identity, agent="toolbox", title="Exported")
    bound = upload_file(
        identity, ContentFile(NOTE, name="notes.txt"), media_type="text/plain", thread_id=thread.id
    )
    loose = upload_file(identity, ContentFile(b"x,y\n1,2\n", name="d.csv"), media_type="text/csv")
    attach = [{"type": "attachment", "fileId": f.id} for f in (bound, loose)]
    _send(identity, thread.id, "use tools", *attach)
    approved = _send(identity, thread.id, "approval please")
    assert approved is not None
    action = PendingAction.objects.get(run=approved)
    services.submit_action(identity, action.id, {"approved": True}, dispatch=False)
    asyncio.run(aexecute_run(approved.id))
    waiting = _send(identity, thread.id, "approval please")
    assert waiting is not None and Run.objects.get(id=waiting.id).status == "waiting"
    services.send(  # queued behind the waiting run
        identity,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": "later"}]},
        dispatch=False,
    )
    if not RunAttempt.objects.filter(run__thread=thread).exists():  # before attempts are written
        RunAttempt.objects.create(
            run=approved, number=1, worker="w1", lease_token=1, claimed_at=timezone.now()
        )
    return thread


def _read(name: str) -> bytes:
    with default_storage.open(name, "rb") as handle:
        return bytes(handle.read())


def _rows() -> dict[str, list[dict[str, Any]]]:
    return {
        kind: [row_data(r) for r in model._default_manager.order_by("pk")]
        for kind, model in KINDS.items()
    }


def _differences(after: dict[str, Any], before: dict[str, Any]) -> list[str]:
    """Every differing column, named: an assertion message that shows what broke."""
    found = []
    for kind, rows in before.items():
        if len(after[kind]) != len(rows):
            found.append(f"{kind}: {len(after[kind])} rows, expected {len(rows)}")
            continue
        for got, want in zip(after[kind], rows, strict=True):
            found += [
                f"{kind}.{k}: {got.get(k)!r} != {v!r}" for k, v in want.items() if got.get(k) != v
            ]
    return found


def _export(*thread_ids: str) -> str:
    out = StringIO()
    export_threads(thread_ids, out)
    return out.getvalue()


def _flush(media: Path) -> None:
    call_command("flush", interactive=False, verbosity=0)
    shutil.rmtree(media, ignore_errors=True)


def test_the_round_trip_reproduces_every_row_exactly_into_a_flushed_database(
    thread: Thread, media_root: Path, tmp_path: Path
) -> None:
    before = _rows()
    assert before["step"] and before["queue_item"] and before["run_attempt"]
    actions = {a["status"]: a for a in before["pending_action"]}
    assert set(actions) == {"executing", "pending"}
    assert actions["executing"]["response"] == {"approved": True}
    assert any(s["usage"].get("inputTokens") for s in before["step"])
    stored = {f["id"]: _read(f["storage_name"]) for f in before["file"]}
    assert NOTE in stored.values() and len(stored) == 2

    path = tmp_path / "thread.jsonl"
    out = StringIO()
    call_command("pai_export", thread.id, "--output", str(path), "--json", stdout=out)
    assert json.loads(out.getvalue())["counts"]["file"] == 2
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "header" and json.loads(lines[-1])["type"] == "end"

    _flush(media_root)
    assert not Thread.objects.exists() and not default_storage.exists(
        before["file"][0]["storage_name"]
    )
    out = StringIO()
    call_command("pai_import", str(path), "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert summary["threads"] == [thread.id] and summary["dryRun"] is False

    # Every column of every row, ids and timestamps included.
    assert _differences(_rows(), before) == []
    for file in before["file"]:
        assert _read(file["storage_name"]) == stored[file["id"]]
    # The imported thread lives on: the pending approval is answered and its run resumes,
    # writing new rows (PostgreSQL's sequences were moved past the imported ids).
    identity = Identity(scope_key=SCOPE)
    pending = PendingAction.objects.get(status="pending")
    services.submit_action(identity, pending.id, {"approved": False}, dispatch=False)
    asyncio.run(aexecute_run(pending.run_id))
    assert Run.objects.get(id=pending.run_id).status == "completed"
    assert Message.objects.count() > len(before["message"])


def test_import_into_a_new_scope_rewrites_every_scope_key(thread: Thread, media_root: Path) -> None:
    before = _rows()
    text = _export(thread.id)
    _flush(media_root)

    dry = import_threads(text.splitlines(), scope="user:heir", dry_run=True)
    assert dry.dry_run and dry.counts["message"] == len(before["message"])
    assert not Thread.objects.exists() and not File.objects.exists()

    import_threads(text.splitlines(), scope="user:heir")
    after = _rows()
    for kind, rows in after.items():
        for row in rows:
            if "scope_key" in row:
                assert row["scope_key"] == "user:heir", kind
                row["scope_key"] = SCOPE
    assert _differences(after, before) == []
    heir = Identity(scope_key="user:heir")
    assert services.get_thread(heir, thread.id).title == "Exported"
    assert len(services.list_messages(heir, thread.id).items) > 0


def test_existing_ids_conflict_and_nothing_is_imported(thread: Thread, tmp_path: Path) -> None:
    text = _export(thread.id)
    path = tmp_path / "again.jsonl"
    path.write_text(text)
    counts = {kind: m._default_manager.count() for kind, m in KINDS.items()}
    with pytest.raises(ImportConflict, match="already exist"):
        import_threads(text.splitlines(), scope="user:copy")
    assert {kind: m._default_manager.count() for kind, m in KINDS.items()} == counts
    with pytest.raises(CommandError, match="already exist"):
        call_command("pai_import", str(path), "--dry-run", stdout=StringIO())


def _mutated(text: str, index: int, change: Any) -> list[str]:
    lines = text.splitlines()
    record = json.loads(lines[index])
    change(record)
    lines[index] = json.dumps(record)
    return lines


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (lambda t: t.splitlines()[:-3], "truncated"),
        (
            lambda t: [*t.splitlines()[:5], '{"type": "run", "data": ', *t.splitlines()[5:]],
            "line 6: not a JSON",
        ),
        (lambda t: _mutated(t, 0, lambda r: r.update(version=99)), "version 99 is not supported"),
        (lambda t: _mutated(t, 0, lambda r: r.update(format="other")), "header"),
        (lambda t: _mutated(t, 2, lambda r: r.update(type="planet")), "unknown record type"),
        (lambda t: _mutated(t, 2, lambda r: r["data"].pop("status")), "columns differ"),
        (lambda t: _mutated(t, 2, lambda r: r["data"].update(status="dancing")), "run.status"),
        (lambda t: _mutated(t, 2, lambda r: r["data"].update(thread_id="thr_x")), "not exported"),
        (lambda t: [*t.splitlines()[:-1], '{"type": "end", "records": 1}'], "end record counts"),
        (
            lambda t: [ln.replace('"content":"', '"content":"AAAA') for ln in t.splitlines()],
            "digest",
        ),
        (lambda t: [], "empty"),
    ],
)
def test_malformed_input_is_a_typed_error_and_imports_nothing(
    thread: Thread, media_root: Path, bad: Any, match: str
) -> None:
    text = _export(thread.id)
    _flush(media_root)
    with pytest.raises(ExportFormatError, match=match):
        import_threads(bad(text))
    assert not Thread.objects.exists() and not Message.objects.exists()
    assert not File.objects.exists() and not QueueItem.objects.exists()
    assert not any(media_root.rglob("*.*")) if media_root.exists() else True


def test_exporting_an_unknown_thread_is_a_command_error() -> None:
    with pytest.raises(CommandError, match="not found"):
        call_command("pai_export", "thr_missing", stdout=StringIO())


def test_export_to_stdout_and_import_from_stdin_with_a_new_scope(
    thread: Thread, media_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = StringIO()
    call_command("pai_export", "--scope", SCOPE, stdout=out)
    _flush(media_root)
    monkeypatch.setattr("sys.stdin", StringIO(out.getvalue()))
    printed = StringIO()
    call_command("pai_import", "-", "--scope", "user:moved", stdout=printed)
    assert printed.getvalue().startswith("imported 1 thread(s)") and thread.id in printed.getvalue()
    assert set(Run.objects.values_list("scope_key", flat=True)) == {"user:moved"}


def test_a_file_written_before_a_column_was_added_imports_with_its_default(
    thread: Thread, media_root: Path
) -> None:
    """ADDED_COLUMNS: an export made before migration 0013 has no pending-action
    ``sequence``; its actions import as episode 0 (the value every earlier action had)."""
    before = _rows()
    lines = []
    for line in _export(thread.id).splitlines():
        record = json.loads(line)
        if record.get("type") == "pending_action":
            record["data"].pop("sequence")
        lines.append(json.dumps(record))
    assert any('"pending_action"' in line for line in lines)
    _flush(media_root)
    import_threads(lines)
    assert not _differences(_rows(), before)
    assert set(PendingAction.objects.values_list("sequence", flat=True)) == {0}
