"""``manage.py pai_purge`` (issue 12, point 4): threads by last activity, archived state and
scope, unreferenced files with their stored bytes; ``--dry-run`` lists exactly what the real
purge then deletes; a thread with an active run is kept, or its run cancelled through the
runtime first."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from pai_agents.messages.file_refs import file_ref_part
from pai_threads import services
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import File, Message, PendingAction, Run, Step, Thread
from pai_threads.services.files import upload_file

pytestmark = pytest.mark.django_db(transaction=True)

OLD = timedelta(days=40)


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Path) -> Iterator[Path]:
    settings.MEDIA_ROOT = str(tmp_path)
    settings.PAI = {
        **settings.PAI,
        "AGENTS": [*settings.PAI["AGENTS"], "tests.support.agents.toolbox"],
    }
    yield tmp_path


def _thread(scope: str, *, age: timedelta = timedelta(0), archived: bool = False) -> Thread:
    thread = Thread.objects.create(scope_key=scope, agent_name="toolbox", archived=archived)
    run = Run.objects.create(
        thread=thread, scope_key=scope, agent_name="toolbox", status="completed"
    )
    moment = timezone.now() - age
    Step.objects.create(
        run=run, index=0, request={}, usage={}, started_at=moment, finished_at=moment
    )
    Run.objects.filter(pk=run.pk).update(created_at=moment, finished_at=moment)
    Thread.objects.filter(pk=thread.pk).update(updated_at=moment)
    return thread


def _file(scope: str, *, age: timedelta, thread: Thread | None = None) -> File:
    identity = Identity(scope_key=scope)
    row = upload_file(
        identity,
        ContentFile(b"hello bytes", name="note.txt"),
        media_type="text/plain",
        thread_id=thread.id if thread else None,
    )
    File.objects.filter(pk=row.pk).update(created_at=timezone.now() - age)
    return row


def _purge(*args: str) -> tuple[dict[str, Any], int]:
    out = StringIO()
    try:
        call_command("pai_purge", "--json", *args, stdout=out)
        code = 0
    except CommandError as exc:
        code = exc.returncode
    return json.loads(out.getvalue()), code


def test_dry_run_lists_exactly_what_the_real_purge_deletes() -> None:
    old = _thread("user:a", age=OLD)
    recent = _thread("user:a", age=timedelta(days=2))
    other_scope_old = _thread("user:b", age=OLD)
    old_file = _file("user:a", age=OLD, thread=old)  # goes with its thread
    # A thread touched recently by a run stays, whatever its own updated_at says.
    revived = _thread("user:a", age=OLD)
    Run.objects.filter(thread=revived).update(finished_at=timezone.now())

    report, code = _purge("--older-than", "30", "--scope", "user:a", "--dry-run")
    assert code == 0 and report["dryRun"] is True
    assert [t["id"] for t in report["threads"]] == [old.id]
    assert Thread.objects.count() == 4 and default_storage.exists(old_file.storage_name)

    real, code = _purge("--older-than", "30", "--scope", "user:a")
    assert code == 0 and real["threads"] == report["threads"]
    assert set(Thread.objects.values_list("id", flat=True)) == {
        recent.id,
        other_scope_old.id,
        revived.id,
    }
    assert not Run.objects.filter(thread_id=old.id).exists()
    assert not Step.objects.filter(run__thread_id=old.id).exists()
    assert not File.objects.filter(id=old_file.id).exists()
    assert not default_storage.exists(old_file.storage_name)  # the bytes too, after commit


def test_archived_threads_and_orphan_files_with_their_bytes() -> None:
    kept = _thread("user:a", age=OLD)
    archived = _thread("user:a", archived=True)
    referenced = _file("user:a", age=OLD)
    Message.objects.create(
        thread=kept,
        scope_key="user:a",
        message_id="msg_1",
        role="user",
        producer="send",
        parts=[file_ref_part(part_id="att_1", file_id=referenced.id, media_type="text/plain")],
    )
    orphan = _file("user:a", age=OLD)
    young_orphan = _file("user:a", age=timedelta(hours=1))  # maybe about to be sent

    report, code = _purge("--archived", "--orphan-files")
    assert code == 0
    assert [t["id"] for t in report["threads"]] == [archived.id]
    assert [f["id"] for f in report["files"]] == [orphan.id]
    assert report["bytes"] == orphan.byte_size
    assert set(File.objects.values_list("id", flat=True)) == {referenced.id, young_orphan.id}
    assert not default_storage.exists(orphan.storage_name)
    assert default_storage.exists(referenced.storage_name)


def test_a_thread_with_an_active_run_is_kept_or_its_run_cancelled_through_the_runtime() -> None:
    identity = Identity(scope_key="user:w")
    thread = services.create_thread(identity, agent="toolbox")
    sent = services.send(
        identity,
        thread.id,
        {"role": "user", "parts": [{"type": "text", "text": "approval please"}]},
        dispatch=False,
    )
    assert sent.run is not None
    run_id = sent.run.id
    asyncio.run(aexecute_run(run_id))
    assert Run.objects.get(id=run_id).status == "waiting"
    Thread.objects.filter(pk=thread.id).update(archived=True)

    report, code = _purge("--archived")
    assert code == 3  # done, but a thread was kept
    assert report["threads"] == [] and report["skipped"] == [
        {"id": thread.id, "reason": f"run {run_id} is waiting"}
    ]
    assert PendingAction.objects.get(run_id=run_id).status == "pending"

    dry, code = _purge("--archived", "--cancel-active", "--dry-run")
    assert code == 0 and [t["id"] for t in dry["threads"]] == [thread.id]
    assert dry["cancelledRuns"] == [] and Run.objects.get(id=run_id).status == "waiting"

    report, code = _purge("--archived", "--cancel-active")
    assert code == 0 and report["cancelledRuns"] == [run_id]
    assert not Thread.objects.filter(id=thread.id).exists()


def test_a_running_run_is_asked_to_stop_and_its_thread_left_for_later() -> None:
    thread = _thread("user:r", archived=True)
    run = Run.objects.create(thread=thread, scope_key="user:r", agent_name="toolbox")
    Run.objects.filter(pk=run.pk).update(status="running")
    report, code = _purge("--archived", "--cancel-active")
    assert code == 3 and report["skipped"][0]["reason"] == f"run {run.id} is running"
    assert Run.objects.get(id=run.id).cancel_requested_at is not None
    assert Thread.objects.filter(id=thread.id).exists()


def test_no_criterion_is_an_error_and_the_text_report_names_the_rows() -> None:
    with pytest.raises(CommandError, match="at least one"):
        call_command("pai_purge")
    thread = _thread("user:t", archived=True)
    out = StringIO()
    call_command("pai_purge", "--archived", "--dry-run", stdout=out)
    assert "would delete 1 thread(s)" in out.getvalue() and thread.id in out.getvalue()
    assert Thread.objects.filter(id=thread.id).exists()
