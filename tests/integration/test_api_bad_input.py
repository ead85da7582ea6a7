"""Bad input never gets a 500: each case a typed 4xx in the envelope, and nothing stored.

NUL characters (``\\u0000``) and lone surrogates in any text or JSON entry point (PostgreSQL
refuses NUL in ``text`` and ``jsonb``: run this module with ``DATABASE_URL`` on PostgreSQL
too), JSON nested past the limit (or past Python's recursion limit), multipart bodies
without a boundary or without parts, oversized bodies. The checks sit at the service
boundary, so websocket commands, which call the same services, get them too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client

from pai_threads import services
from pai_threads.errors import InvalidInput, NotFound
from pai_threads.identity import Identity
from pai_threads.models import File, Message, PendingAction, QueueItem, Run, Thread
from pai_threads.services.input_guard import MAX_JSON_DEPTH
from tests.support.server import REPO_ROOT, Browser, DaphneServer
from tests.support.workers import database_url_from_settings

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"
NUL = "a\u0000b"


@pytest.fixture(autouse=True)
def setup(settings: Any, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = str(tmp_path / "media")
    agents = [*settings.PAI["AGENTS"], "tests.support.agents.toolbox"]
    settings.PAI = {**settings.PAI, "AGENTS": agents}


@pytest.fixture
def client() -> Client:
    """A browser with a session cookie and its CSRF token (so the CSRF check runs)."""
    browser = Client(enforce_csrf_checks=True, raise_request_exception=False)
    browser.defaults["HTTP_X_CSRFTOKEN"] = browser.get(f"{API}/session").json()["csrfToken"]
    return browser


def call(client: Client, method: str, path: str, body: Any = None) -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.generic(method, f"{API}{path}", data, content_type="application/json")


def assert_error(response: Any, status: int, code: str) -> str:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code, error
    return str(error["message"])


def new_thread(client: Client, agent: str = "assistant") -> str:
    response = call(client, "POST", "/threads", {"agent": agent})
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def stored(thread_id: str) -> tuple[int, int, int]:
    return (
        Message.objects.filter(thread_id=thread_id).count(),
        Run.objects.filter(thread_id=thread_id).count(),
        QueueItem.objects.filter(thread_id=thread_id).count(),
    )


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def deep_text(depth: int) -> str:
    """JSON text nested ``depth`` levels, built without recursion."""
    return '{"a":' * depth + "1" + "}" * depth


def message(**fields: Any) -> dict[str, Any]:
    return {"parts": [{"type": "text", "text": "hello"}], **fields}


# -- NUL and lone surrogates ------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"text": NUL},
        {"text": "\ud800 lone surrogate"},
        {"message": message(parts=[{"type": "text", "text": NUL}])},
        {"message": message(id=NUL)},
        {"message": message(metadata={"note": NUL})},
        {"message": message(metadata={NUL: "key"})},
        {"message": message(parts=[{"type": "data-note", "data": {"deep": [NUL]}}])},
        {"message": message(parts=[{"type": "attachment", "fileId": NUL}])},
        {"text": "hi", "clientData": {"x": NUL}},
    ],
    ids=[
        "text",
        "surrogate",
        "part",
        "message-id",
        "metadata-value",
        "metadata-key",
        "data-part",
        "file-id",
        "client-data",
    ],
)
def test_unstorable_text_in_a_send_is_422_and_stores_nothing(
    client: Client, body: dict[str, Any]
) -> None:
    thread_id = new_thread(client)
    raw = json.dumps(body)  # \u0000 and \ud800 travel as JSON escapes
    response = call(client, "POST", f"/threads/{thread_id}/messages", raw)
    message_text = assert_error(response, 422, "invalid_input")
    if "\\u0000" in raw:
        assert "NUL" in message_text
    assert stored(thread_id) == (0, 0, 0)


def test_unstorable_text_in_titles_and_the_ai_sdk_is_422(client: Client) -> None:
    before = Thread.objects.count()
    assert_error(call(client, "POST", "/threads", {"title": NUL}), 422, "invalid_input")
    assert Thread.objects.count() == before

    thread_id = new_thread(client)
    assert_error(
        call(client, "PATCH", f"/threads/{thread_id}", {"title": NUL}), 422, "invalid_input"
    )
    assert Thread.objects.get(id=thread_id).title == ""

    chat = {"id": thread_id, "messages": [{"id": "m1", "role": "user", **message()}]}
    chat["messages"][0]["parts"] = [{"type": "text", "text": NUL}]
    assert_error(call(client, "POST", "/ai-sdk/chat", chat), 422, "invalid_input")
    chat["messages"][0] = {"id": "m1", "role": "user", **message(), "metadata": {"k": NUL}}
    assert_error(call(client, "POST", "/ai-sdk/chat", chat), 422, "invalid_input")
    chat["clientData"], chat["messages"][0] = {"k": NUL}, {"id": "m1", "role": "user", **message()}
    assert_error(call(client, "POST", "/ai-sdk/chat", chat), 422, "invalid_input")
    assert stored(thread_id) == (0, 0, 0)


def waiting_action(client: Client) -> PendingAction:
    thread_id = new_thread(client, "toolbox")
    sent = call(client, "POST", f"/threads/{thread_id}/messages", {"text": "approval"})
    assert sent.status_code == 202, sent.content
    deadline = time.monotonic() + 30
    while not (action := PendingAction.objects.filter(thread_id=thread_id).first()):
        assert time.monotonic() < deadline, "no pending action"
        time.sleep(0.05)
    return action


def test_unstorable_text_in_an_action_answer_is_422_and_the_action_stays_pending(
    client: Client,
) -> None:
    action = waiting_action(client)
    for answer in (
        {"approved": False, "reason": NUL},
        {"output": {"nested": [NUL]}},
        {"errorText": NUL},
        {"output": nested(MAX_JSON_DEPTH + 1)},
    ):
        assert_error(call(client, "POST", f"/actions/{action.id}", answer), 422, "invalid_input")
    action.refresh_from_db()
    assert action.status == PendingAction.Status.PENDING and action.response is None
    approval = call(client, "POST", "/ai-sdk/chat", _approval_answer(action, approval_id=NUL))
    assert_error(approval, 404, "not_found")
    action.refresh_from_db()
    assert action.status == PendingAction.Status.PENDING


def _approval_answer(action: PendingAction, *, approval_id: str) -> dict[str, Any]:
    part = {
        "type": f"tool-{action.tool_name}",
        "toolCallId": action.tool_call_id,
        "state": "approval-responded",
        "input": action.input,
        "approval": {"id": approval_id, "approved": True},
    }
    last = {"id": action.message_id, "role": "assistant", "parts": [part]}
    return {"id": action.thread_id, "messages": [last]}


def test_unstorable_text_in_an_upload_is_422_and_stores_nothing(
    client: Client, settings: Any
) -> None:
    media = Path(settings.MEDIA_ROOT)
    for fields in (
        {"filename": NUL},
        {"mediaType": "text/plain\u0000"},
        {"metadata": json.dumps({"k": NUL})},
        {"metadata": deep_text(MAX_JSON_DEPTH + 1)},
        {"metadata": deep_text(100_000)},
    ):
        upload = SimpleUploadedFile("notes.txt", b"hello", content_type="text/plain")
        response = client.post(f"{API}/files", {"file": upload, **fields})
        assert_error(response, 422, "invalid_input")
    assert File.objects.count() == 0
    assert not media.exists() or not any(p.is_file() for p in media.rglob("*"))


def test_unstorable_ids_in_paths_and_queries_are_404(client: Client) -> None:
    for method, path in (
        ("GET", "/threads/thr%00x"),
        ("GET", "/threads/thr%00x/messages"),
        ("GET", "/threads/thr%00x/state"),
        ("DELETE", "/threads/thr%00x"),
        ("POST", "/threads/thr%00x/regenerate"),
        ("GET", "/runs/run%00x"),
        ("POST", "/runs/run%00x/cancel"),
        ("GET", "/actions?thread_id=thr%00x"),
        ("POST", "/actions/act%00x"),
        ("GET", "/files/fil%00x/content"),
        ("GET", "/ai-sdk/chat/thr%00x/stream"),
    ):
        body = {"approved": True} if path.startswith("/actions/") else None
        assert_error(call(client, method, path, body), 404, "not_found")
    chat = {"id": NUL, "messages": [{"id": "m1", "role": "user", **message()}]}
    assert_error(call(client, "POST", "/ai-sdk/chat", chat), 404, "not_found")


def test_the_services_refuse_unstorable_text_for_every_caller(alice: Identity) -> None:
    """Websocket commands and trusted code call these: the same checks, nothing stored."""
    thread = services.create_thread(alice)
    with pytest.raises(InvalidInput, match="NUL"):
        services.create_thread(alice, title=NUL)
    with pytest.raises(InvalidInput, match="NUL"):
        services.rename_thread(alice, thread.id, NUL)
    with pytest.raises(InvalidInput, match="NUL"):
        services.send(alice, thread.id, message(parts=[{"type": "text", "text": NUL}]))
    with pytest.raises(InvalidInput, match="nested deeper"):
        services.send(alice, thread.id, message(), client_data=nested(MAX_JSON_DEPTH + 1))
    with pytest.raises(NotFound):
        services.get_thread(alice, NUL)
    with pytest.raises(NotFound):
        services.cancel_run(alice, NUL)
    with pytest.raises(NotFound):
        services.submit_action(alice, NUL, {"approved": True})
    assert stored(thread.id) == (0, 0, 0)
    assert Thread.objects.filter(scope_key=alice.scope_key).count() == 1


# -- deeply nested JSON -----------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 100_000], ids=["over-limit", "recursion"])
def test_deeply_nested_json_is_a_typed_error_on_every_json_endpoint(
    client: Client, depth: int
) -> None:
    thread_id = new_thread(client)
    threads_before = Thread.objects.count()
    deep = deep_text(depth)
    for method, path, body in (
        ("POST", "/threads", deep),
        ("PATCH", f"/threads/{thread_id}", deep),
        ("POST", f"/threads/{thread_id}/messages", deep),
        ("POST", f"/threads/{thread_id}/messages", '{"text": "hi", "clientData": ' + deep + "}"),
        ("POST", "/actions/act_missing", deep),
        ("POST", "/ai-sdk/chat", deep),
        ("POST", "/ai-sdk/chat", '{"id": "' + thread_id + '", "messages": [' + deep + "]}"),
    ):
        error = assert_error(call(client, method, path, body), 422, "invalid_input")
        assert f"nested deeper than {MAX_JSON_DEPTH}" in error
    assert stored(thread_id) == (0, 0, 0)
    assert Thread.objects.count() == threads_before


def test_json_just_inside_the_depth_limit_is_accepted(
    client: Client, wait_for_run: Callable[..., Run]
) -> None:
    thread_id = new_thread(client)
    # The body, the object under clientData and the value: the limit counts from the body.
    body = {"text": "hi", "clientData": {"v": nested(MAX_JSON_DEPTH - 3)}}
    response = call(client, "POST", f"/threads/{thread_id}/messages", body)
    assert response.status_code == 202, response.content
    assert wait_for_run(response.json()["run"]["id"]).status == Run.Status.COMPLETED


# -- multipart framing ------------------------------------------------------------------------


def test_multipart_without_a_boundary_is_400_on_cancel_and_regenerate(client: Client) -> None:
    """The CSRF check reads the form body of a cookie request: an unreadable multipart body
    is a typed 400 there, and the run and the transcript stay as they were."""
    thread_id = new_thread(client, "toolbox")
    sent = call(client, "POST", f"/threads/{thread_id}/messages", {"text": "approval"})
    run_id = sent.json()["run"]["id"]
    for path in (f"/runs/{run_id}/cancel", f"/threads/{thread_id}/regenerate"):
        response = client.post(f"{API}{path}", b"--x\r\n", content_type="multipart/form-data")
        assert "boundary" in assert_error(response, 400, "bad_request")
    assert Run.objects.get(id=run_id).status in Run.ACTIVE
    assert Run.objects.filter(thread_id=thread_id).count() == 1
    assert Message.objects.filter(thread_id=thread_id, role="user").count() == 1
    # The run executes on the in-process executor: let it reach its approval before the
    # test database is flushed (a flush racing its writes deadlocks on PostgreSQL).
    deadline = time.monotonic() + 30
    while Run.objects.get(id=run_id).status != Run.Status.WAITING:
        assert time.monotonic() < deadline, "the run never reached its approval"
        time.sleep(0.05)


@pytest.mark.parametrize(
    "body", [b"--BOUND--\r\n", b"--BOUND--", b""], ids=["crlf", "bare", "empty"]
)
def test_a_multipart_upload_without_parts_is_400(client: Client, body: bytes) -> None:
    response = client.post(f"{API}/files", body, content_type="multipart/form-data; boundary=BOUND")
    assert_error(response, 400, "bad_request")
    assert File.objects.count() == 0


# -- sizes ------------------------------------------------------------------------------------


def test_oversized_bodies_are_413_and_store_nothing(client: Client, settings: Any) -> None:
    thread_id = new_thread(client)
    limit = int(settings.PAI.get("MAX_MESSAGE_BYTES", 256 * 1024))
    big = "x" * (limit + 1)
    last = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": big}]}
    for method, path, body in (
        ("POST", f"/threads/{thread_id}/messages", {"text": big}),
        ("POST", "/ai-sdk/chat", {"id": thread_id, "messages": [last]}),
        ("POST", "/ai-sdk/chat", {"id": thread_id, "messages": [{}], "pad": "x" * 3_000_000}),
        ("POST", "/threads", {"title": "x" * 3_000_000}),
    ):
        assert_error(call(client, method, path, body), 413, "payload_too_large")
    assert stored(thread_id) == (0, 0, 0)


# -- the same bodies through daphne -----------------------------------------------------------

# The test server, started the way pai_threads.asgi should start daphne's: with Twisted's own
# form parsing off (defer_body_parsing_to_django), so malformed multipart bodies reach the API
# instead of getting Twisted's bare 400.
LAUNCHER = (
    "import django; django.setup(); "
    "from pai_threads.api.daphne_bodies import defer_body_parsing_to_django; "
    "assert defer_body_parsing_to_django(); "
    "from daphne.cli import CommandLineInterface; CommandLineInterface.entrypoint()"
)


@pytest.fixture(scope="module")
def daphne(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    with django_db_blocker.unblock():
        database_url = database_url_from_settings(connection.settings_dict)
    log_dir = Path(os.environ.get("PAI_ARTIFACTS_DIR") or tmp_path_factory.mktemp("logs"))
    server = DaphneServer(database_url=database_url, log_path=log_dir / "servers" / "bodies.log")
    server.log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-c", LAUNCHER, "-b", "127.0.0.1", "-p", str(server.port)]
    with server.log_path.open("wb") as log:
        server.process = subprocess.Popen(
            [*argv, "pai_project.asgi:application"],
            cwd=REPO_ROOT,
            env=server.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 30
        while not _ready(server):
            assert server.process.poll() is None, server.log_text()[-4000:]
            assert time.monotonic() < deadline, server.log_text()[-4000:]
            time.sleep(0.1)
        yield server
    finally:
        server.stop()


def _ready(server: DaphneServer) -> bool:
    try:
        return httpx.get(f"{server.url}/api/pai/session", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.slow
async def test_daphne_hands_malformed_multipart_to_the_api(daphne: DaphneServer) -> None:
    async with Browser(daphne) as browser:
        thread_id = await browser.create_thread("toolbox")
        sent = await browser.send(thread_id, "approval")
        headers = {"X-CSRFToken": browser.csrf}
        for path, content_type, body in (
            (f"/runs/{sent['run']['id']}/cancel", "multipart/form-data", b"--x\r\n"),
            (f"/threads/{thread_id}/regenerate", "multipart/form-data", b"x"),
            ("/files", "multipart/form-data; boundary=BOUND", b"--BOUND--\r\n"),
        ):
            response = await browser.http.post(
                f"/api/pai{path}", content=body, headers={**headers, "Content-Type": content_type}
            )
            assert response.status_code == 400, (path, response.text)
            assert response.headers["content-type"].startswith("application/json"), path
            assert response.json()["error"]["code"] == "bad_request"
        run = (await browser.api("GET", f"/runs/{sent['run']['id']}")).json()
    assert run["status"] in ("queued", "running", "waiting")
    assert await sync_to_async(File.objects.count)() == 0
