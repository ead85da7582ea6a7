"""Deleting and archiving threads: ``DELETE /threads/{id}`` is scoped, stops an active run
first, removes everything the thread holds and tells live clients; ``archived`` is a flag
on the thread that the list filters on and subscribers see."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from pai_threads import services
from pai_threads.errors import NotFound
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import File, Message, PendingAction, QueueItem, Run, Step, Thread
from pai_threads.services import files
from tests.support.realtime import recv, recv_until, server_fixture
from tests.support.server import Browser, DaphneServer

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"
TEXT = {"role": "user", "parts": [{"type": "text", "text": "hello"}]}


@pytest.fixture(autouse=True)
def agents(settings: Any, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    extra = ["tests.support.agents.slow", "tests.support.agents.toolbox"]
    settings.PAI = {**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], *extra]}


def rows_of(thread_id: str) -> dict[str, int]:
    """Every table that holds something of a thread."""
    return {
        "threads": Thread.objects.filter(id=thread_id).count(),
        "messages": Message.objects.filter(thread_id=thread_id).count(),
        "runs": Run.objects.filter(thread_id=thread_id).count(),
        "steps": Step.objects.filter(run__thread_id=thread_id).count(),
        "queue": QueueItem.objects.filter(thread_id=thread_id).count(),
        "actions": PendingAction.objects.filter(thread_id=thread_id).count(),
        "files": File.objects.filter(thread_id=thread_id).count(),
    }


NOTHING = dict.fromkeys(("threads", "messages", "runs", "steps", "queue", "actions", "files"), 0)


def wait_status(run_id: str, status: str, timeout: float = 30.0) -> Run:
    deadline = time.monotonic() + timeout
    while (run := Run.objects.get(id=run_id)).status != status:
        assert time.monotonic() < deadline, f"run {run_id} is {run.status}, not {status}"
        time.sleep(0.02)
    return run


def test_delete_removes_the_thread_and_everything_in_it(alice: Identity, bob: Identity) -> None:
    """A waiting run with a pending action, queued input and a bound file: all gone, the
    stored bytes too; another scope gets 404 and changes nothing."""
    thread = services.create_thread(alice, agent="toolbox")
    first = services.send(
        alice, thread.id, {**TEXT, "parts": [{"type": "text", "text": "approval"}]}
    )
    assert first.run is not None
    wait_status(first.run.id, Run.Status.WAITING)
    services.send(alice, thread.id, TEXT)  # queued behind the waiting run
    upload = SimpleUploadedFile("a.txt", b"some notes", content_type="text/plain")
    stored = files.upload_file(alice, upload, thread_id=thread.id)
    assert default_storage.exists(stored.storage_name)
    before = rows_of(thread.id)
    assert all(before[k] for k in ("messages", "runs", "queue", "actions", "files")), before

    with pytest.raises(NotFound):
        services.delete_thread(bob, thread.id)
    assert rows_of(thread.id) == before

    assert services.delete_thread(alice, thread.id) == [first.run.id]
    assert rows_of(thread.id) == NOTHING
    assert not default_storage.exists(stored.storage_name)
    with pytest.raises(NotFound):
        services.send(alice, thread.id, TEXT)
    with pytest.raises(NotFound):
        services.get_run(alice, first.run.id)


async def test_delete_stops_a_running_run_first(alice: Identity) -> None:
    """The execution is aborted at once and writes nothing after the delete."""
    thread = await sync_to_async(services.create_thread)(alice, agent="slow")
    long_text = {**TEXT, "parts": [{"type": "text", "text": "a long answer please"}]}
    sent = await sync_to_async(services.send)(alice, thread.id, long_text, dispatch=False)
    assert sent.run is not None
    execution = asyncio.ensure_future(aexecute_run(sent.run.id))
    await sync_to_async(wait_status)(sent.run.id, Run.Status.RUNNING)

    active = await sync_to_async(services.delete_thread)(alice, thread.id)
    outcome = await asyncio.wait_for(execution, 30)

    assert active == [sent.run.id]
    assert outcome is None or outcome.status == Run.Status.CANCELLED
    assert await sync_to_async(rows_of)(thread.id) == NOTHING


def test_delete_over_http_is_scoped_and_enveloped() -> None:
    owner, stranger = (Client(raise_request_exception=False) for _ in range(2))
    thread_id = owner.post(f"{API}/threads", "{}", content_type="application/json").json()["id"]

    response = stranger.delete(f"{API}/threads/{thread_id}")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert Thread.objects.filter(id=thread_id).exists()

    deleted = owner.delete(f"{API}/threads/{thread_id}")
    assert deleted.status_code == 204 and deleted.content == b""
    gone = owner.delete(f"{API}/threads/{thread_id}")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"
    assert owner.get(f"{API}/threads/{thread_id}").status_code == 404


def test_archive_is_a_flag_the_list_filters_on() -> None:
    client = Client(raise_request_exception=False)

    def create(title: str) -> str:
        body = f'{{"title": "{title}"}}'
        return str(
            client.post(f"{API}/threads", body, content_type="application/json").json()["id"]
        )

    def listed(query: str = "") -> list[str]:
        return [t["id"] for t in client.get(f"{API}/threads{query}").json()["threads"]]

    kept, archived = create("kept"), create("old")
    patch = client.patch(
        f"{API}/threads/{archived}", '{"archived": true}', content_type="application/json"
    )
    assert patch.status_code == 200, patch.content
    assert patch.json()["archived"] is True and patch.json()["title"] == "old"
    assert client.get(f"{API}/threads/{kept}").json()["archived"] is False

    assert listed("?archived=true") == [archived]
    assert listed("?archived=false") == [kept]
    assert set(listed()) == {kept, archived}

    both = client.patch(
        f"{API}/threads/{archived}",
        '{"archived": false, "title": "restored"}',
        content_type="application/json",
    ).json()
    assert both["archived"] is False and both["title"] == "restored"
    assert set(listed("?archived=false")) == {kept, archived}
    empty = client.patch(f"{API}/threads/{kept}", "{}", content_type="application/json")
    assert empty.status_code == 200 and empty.json()["title"] == "kept"  # nothing to change
    null = client.patch(
        f"{API}/threads/{kept}", '{"archived": null}', content_type="application/json"
    )
    assert null.status_code == 422 and null.json()["error"]["code"] == "invalid_input"
    assert client.get(f"{API}/threads/{kept}").json()["archived"] is False
    assert client.get(f"{API}/threads?archived=maybe").status_code == 422


# -- live clients -------------------------------------------------------------------------------


server = server_fixture("thread-delete")


@pytest.mark.slow
async def test_live_clients_see_archive_and_delete(server: DaphneServer) -> None:
    async with Browser(server) as alice:
        thread_id = await alice.create_thread("slow", title="Doomed")
        async with alice.websocket(thread_id) as ws:
            await recv_until(ws, lambda f: f["type"] == "synced")
            archived = await alice.api("PATCH", f"/threads/{thread_id}", {"archived": True})
            assert archived.status_code == 200, archived.text
            updated = await recv(ws)
            deleted = await alice.api("DELETE", f"/threads/{thread_id}")
            assert deleted.status_code == 204, deleted.text
            frames = await recv_until(ws, lambda f: f["type"] == "thread.deleted")

    assert updated["type"] == "thread.updated" and updated["thread"]["archived"] is True
    assert frames[-1] == {"type": "thread.deleted", "threadId": thread_id, "seq": frames[-1]["seq"]}
