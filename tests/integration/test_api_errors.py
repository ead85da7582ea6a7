"""One error envelope for everything under /api/pai/ (the JSON API and the AI SDK endpoint):
every 4xx/5xx is ``{"error": {"code", "message", "details"?}}`` as JSON; a 500 is logged and
generic even in DEBUG; a database outage during a send is 503 with Retry-After and stores
nothing; the OpenAPI document and the offline Swagger page."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.db import connection
from django.test import Client

from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Message, QueueItem, Run, Thread
from tests.support.durable_harness import wait_terminal

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"


def no_identity(request: Any) -> None:
    """An identity resolver that recognises nobody: every API call is 401."""
    return None


def assert_envelope(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert set(body["error"]) <= {"code", "message", "details"}
    return dict(body["error"])


@pytest.fixture
def client() -> Client:
    """A browser: session cookie and CSRF token, errors answered (never raised)."""
    browser = Client(enforce_csrf_checks=True, raise_request_exception=False)
    token = browser.get(f"{API}/session").json()["csrfToken"]
    browser.defaults["HTTP_X_CSRFTOKEN"] = token
    return browser


def _json(client: Client, method: str, path: str, body: Any, **extra: Any) -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.generic(method, f"{API}{path}", data, content_type="application/json", **extra)


@pytest.fixture
def toolbox(settings: Any) -> None:
    agents = [*settings.PAI["AGENTS"], "tests.support.agents.toolbox"]
    settings.PAI = {**settings.PAI, "AGENTS": agents}


def waiting_thread(client: Client) -> tuple[str, Run]:
    """A toolbox thread whose run waits for an approval."""
    thread_id = _json(client, "POST", "/threads", {"agent": "toolbox"}).json()["id"]
    sent = _json(client, "POST", f"/threads/{thread_id}/messages", {"text": "approval please"})
    assert sent.status_code == 202, sent.content
    deadline = time.monotonic() + 30
    while (run := Run.objects.get(id=sent.json()["run"]["id"])).status != Run.Status.WAITING:
        assert run.status in Run.ACTIVE and time.monotonic() < deadline, run.status
        time.sleep(0.05)
    return thread_id, run


# -- every status ------------------------------------------------------------------------------


def test_unknown_paths_under_the_prefix_are_enveloped_404s(client: Client) -> None:
    for method in ("GET", "POST", "DELETE", "PUT"):
        for path in ("/nope", "/threads/thr_1/nope/deeper", "/threads/", "/ai-sdk/other"):
            error = assert_envelope(client.generic(method, f"{API}{path}"), 404, "not_found")
            assert path in error["message"]


def test_a_method_not_allowed_is_enveloped_with_allow(client: Client) -> None:
    response = client.put(f"{API}/threads", "{}", content_type="application/json")
    assert_envelope(response, 405, "method_not_allowed")
    assert set(response["Allow"].replace(" ", "").split(",")) == {"GET", "POST"}
    for method, path, allowed in (
        ("GET", "/ai-sdk/chat", "POST"),
        ("POST", "/ai-sdk/chat/thr_1/stream", "GET"),
        ("PUT", "/runs/run_1", "GET"),
    ):
        response = client.generic(method, f"{API}{path}")
        assert_envelope(response, 405, "method_not_allowed")
        assert response["Allow"] == allowed


def test_every_client_error_status_uses_the_envelope(
    client: Client, settings: Any, toolbox: None
) -> None:
    thread_id, run = waiting_thread(client)
    [action] = services.list_actions(Identity(scope_key=run.scope_key), thread_id=thread_id)
    answer = {"approved": True}
    assert _json(client, "POST", f"/actions/{action.id}", answer).status_code == 200

    cases = [
        (_json(client, "POST", "/threads", "{oops"), 400, "bad_request"),
        (_json(client, "POST", f"/threads/{thread_id}/messages", "[1,"), 400, "bad_request"),
        (_json(client, "POST", "/ai-sdk/chat", "{oops"), 400, "bad_request"),
        (_json(client, "POST", "/threads", {}, HTTP_X_CSRFTOKEN="wrong"), 403, "forbidden"),
        (_json(client, "POST", "/ai-sdk/chat", {}, HTTP_X_CSRFTOKEN="x"), 403, "forbidden"),
        (client.get(f"{API}/threads/thr_missing"), 404, "not_found"),
        (client.get(f"{API}/ai-sdk/chat/thr_missing/stream"), 404, "not_found"),
        (client.delete(f"{API}/threads"), 405, "method_not_allowed"),
        (_json(client, "POST", f"/actions/{action.id}", answer), 409, "action_conflict"),
        (_json(client, "POST", "/threads", {"title": "x" * 3_000_000}), 413, "payload_too_large"),
        (_json(client, "POST", "/threads", {"agent": "nope"}), 422, "invalid_input"),
        (_json(client, "PATCH", f"/threads/{thread_id}", {"title": 5}), 422, "invalid_input"),
        (_json(client, "POST", "/ai-sdk/chat", {"id": thread_id}), 422, "invalid_input"),
    ]
    for response, status, code in cases:
        assert_envelope(response, status, code)
    # The approved run resumes on the in-process executor: let it end while its agent is
    # still registered, so nothing of this test runs into the next one.
    wait_terminal(run.id)

    settings.PAI = {**settings.PAI, "IDENTITY_RESOLVER": f"{__name__}.no_identity"}
    assert_envelope(client.get(f"{API}/threads"), 401, "unauthenticated")
    assert_envelope(_json(client, "POST", "/ai-sdk/chat", {}), 401, "unauthenticated")


def test_an_unsupported_upload_type_is_an_enveloped_415(
    client: Client, settings: Any, tmp_path: Any
) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    settings.PAI = {**settings.PAI, "FILE_MEDIA_TYPES": ["image/png"]}
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("notes.txt", b"hello", content_type="text/plain")
    assert_envelope(client.post(f"{API}/files", {"file": upload}), 415, "unsupported_media_type")


# -- 500: logged, generic, never a traceback ---------------------------------------------------


def test_an_unexpected_error_is_a_generic_500_logged_even_in_debug(
    client: Client, settings: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    settings.DEBUG = True
    thread_id = _json(client, "POST", "/threads", {}).json()["id"]

    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(services, "list_threads", explode)
    monkeypatch.setattr(services, "get_thread", explode)
    with caplog.at_level(logging.ERROR, logger="pai.api"):
        responses = [
            client.get(f"{API}/threads"),
            _json(client, "POST", "/ai-sdk/chat", {"id": thread_id, "messages": [{}]}),
        ]
    for response in responses:
        error = assert_envelope(response, 500, "server_error")
        assert "secret" not in response.content.decode() and "Traceback" not in error["message"]
    logged = [r for r in caplog.records if r.name == "pai.api" and r.exc_info]
    assert len(logged) == 2
    assert all("secret internal detail" in str(r.exc_info[1]) for r in logged)


# -- 503: a database outage during a send -------------------------------------------------------


@contextmanager
def database_outage_at_insert(table: str) -> Iterator[None]:
    """A real OperationalError from the database when the send writes to ``table`` (with
    the row's own INSERT, or in the one statement of a send to an idle thread).

    PostgreSQL: the statement is replaced by this very backend's termination
    (``pg_terminate_backend``), so the server drops the connection mid-transaction.
    SQLite: another connection holds the write lock and this one stops waiting for it
    (busy timeout 0), which SQLite reports as "database is locked"."""
    if connection.vendor == "postgresql":

        def terminate(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            # The insert itself, or a statement that inserts in a CTE (the fused send).
            if f'INSERT INTO "{table}"' in sql:
                return execute("SELECT pg_terminate_backend(pg_backend_pid())", (), False, context)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(terminate):
            yield
        return
    connection.ensure_connection()
    connection.connection.execute("PRAGMA busy_timeout = 0")
    holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        connection.close()  # the next query reconnects with the configured timeout


def test_a_send_the_database_cannot_store_is_a_503_with_retry_after(
    client: Client, wait_for_run: Callable[..., Run]
) -> None:
    thread_id = _json(client, "POST", "/threads", {}).json()["id"]
    message = {"id": "msg_outage", "parts": [{"type": "text", "text": "hello"}]}
    with database_outage_at_insert(Run._meta.db_table):
        response = _json(client, "POST", f"/threads/{thread_id}/messages", {"message": message})
    error = assert_envelope(response, 503, "service_unavailable")
    assert int(response["Retry-After"]) > 0 and "retry" in error["message"].lower()
    assert not Message.objects.filter(thread_id=thread_id).exists()
    assert not Run.objects.filter(thread_id=thread_id).exists()
    assert not QueueItem.objects.filter(thread_id=thread_id).exists()

    retried = _json(client, "POST", f"/threads/{thread_id}/messages", {"message": message})
    assert retried.status_code == 202, retried.content
    again = _json(client, "POST", f"/threads/{thread_id}/messages", {"message": message})
    assert again.status_code == 200 and again.json()["run"]["id"] == retried.json()["run"]["id"]
    assert Message.objects.filter(thread_id=thread_id, message_id="msg_outage").count() == 1
    wait_for_run(retried.json()["run"]["id"])


def test_an_ai_sdk_send_during_an_outage_is_a_503(client: Client) -> None:
    thread_id = _json(client, "POST", "/threads", {}).json()["id"]
    body = {"id": thread_id, "messages": [{"id": "m1", "role": "user", "parts": []}]}
    body["messages"][0]["parts"] = [{"type": "text", "text": "hello"}]
    with database_outage_at_insert(Run._meta.db_table):
        response = _json(client, "POST", "/ai-sdk/chat", body)
    assert_envelope(response, 503, "service_unavailable")
    assert response["Retry-After"]
    assert not Message.objects.filter(thread_id=thread_id).exists()
    assert Thread.objects.filter(id=thread_id).exists()


# -- the OpenAPI document and the docs page --------------------------------------------------


def test_the_docs_page_works_offline(client: Client) -> None:
    page = client.get(f"{API}/docs")
    assert page.status_code == 200
    html = page.content.decode()
    assert "cdn." not in html and "https://" not in html.replace("https://swagger.io", "")
    for asset in ("ninja/swagger-ui-bundle.js", "ninja/swagger-ui.css", "ninja/swagger-ui-init.js"):
        assert f"/static/{asset}" in html
        assert finders.find(asset), f"{asset} is not served by staticfiles"


def test_the_openapi_document_describes_the_whole_api(client: Client) -> None:
    schema = client.get(f"{API}/openapi.json").json()
    description = schema["info"]["description"]
    assert "docs/realtime.md" in description and "docs/quickstart.md" in description
    paths = schema["paths"]
    assert {"/api/pai/ai-sdk/chat", "/api/pai/ai-sdk/chat/{chat_id}/stream"} <= set(paths)
    assert "delete" in paths["/api/pai/threads/{thread_id}"]
    scheme = schema["components"]["securitySchemes"]
    assert [s["in"] for s in scheme.values()] == ["cookie"]
    for path, operations in paths.items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert {"400", "404", "422", "500", "503"} <= codes, (method, path, codes)
            for code, response in operation["responses"].items():
                if code.startswith(("4", "5")):
                    ref = response["content"]["application/json"]["schema"]["$ref"]
                    assert ref.endswith("/ErrorOut"), (method, path, code)
            if path != "/api/pai/session":
                # The cookie is optional: the default resolver makes a session.
                assert {} in operation["security"], (method, path)
    chat = paths["/api/pai/ai-sdk/chat"]["post"]
    assert "text/event-stream" in chat["responses"]["200"]["content"]
    thread = schema["components"]["schemas"]["ThreadOut"]
    assert "archived" in thread["properties"]
