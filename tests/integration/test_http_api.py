"""The HTTP API under /api/pai/: the demo flow end to end, scoping, and bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from pai_threads.models import Run
from tests.integration.test_send_and_execute import assert_calculator_transcript

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"


def _csrf(client: Client) -> dict[str, str]:
    """Fetch a CSRF token the way a page would (the chat page sets the cookie)."""
    client.get("/")
    token = client.cookies.get("csrftoken")
    return {"HTTP_X_CSRFTOKEN": token.value} if token else {}


def _post(client: Client, path: str, body: Any, **extra: Any) -> Any:
    return client.post(
        f"{API}{path}", data=json.dumps(body), content_type="application/json", **extra
    )


def test_send_through_the_api_runs_the_agent_on_the_thread_executor(
    api_client: Client, wait_for_run: Callable[..., Run]
) -> None:
    created = _post(api_client, "/threads", {"title": "Maths"})
    assert created.status_code == 201, created.content
    thread = created.json()
    assert thread["agent"] == "assistant" and thread["title"] == "Maths"
    headers = _csrf(api_client)

    sent = _post(
        api_client, f"/threads/{thread['id']}/messages", {"text": "What is 6*7?"}, **headers
    )
    assert sent.status_code == 202, sent.content
    body = sent.json()
    assert body["message"]["role"] == "user"
    assert body["message"]["metadata"]["pai"]["runId"] == body["run"]["id"]

    run = wait_for_run(body["run"]["id"])
    assert_calculator_transcript(run, "42")

    got = api_client.get(f"{API}/runs/{run.id}").json()
    assert got["status"] == "completed" and got["stepCount"] == 2
    assert got["usage"]["totalTokens"] > 0
    page = api_client.get(f"{API}/threads/{thread['id']}/messages").json()
    assert [m["role"] for m in page["messages"]] == ["user", "assistant", "assistant"]
    assert page["nextPageToken"] is None
    assert all(m["metadata"]["pai"]["status"] == "committed" for m in page["messages"])


def test_list_threads_pages_with_opaque_tokens(api_client: Client) -> None:
    headers = _csrf(api_client)
    ids = [
        _post(api_client, "/threads", {"title": f"t{i}"}, **headers).json()["id"] for i in range(5)
    ]
    seen: list[str] = []
    url = f"{API}/threads?limit=2"
    while url:
        page = api_client.get(url).json()
        seen += [t["id"] for t in page["threads"]]
        url = (
            f"{API}/threads?limit=2&pageToken={page['nextPageToken']}"
            if page["nextPageToken"]
            else ""
        )
    assert sorted(seen) == sorted(ids) and len(seen) == 5


def test_another_identity_gets_404_for_the_thread_and_its_run(api_client: Client) -> None:
    headers = _csrf(api_client)
    thread = _post(api_client, "/threads", {}, **headers).json()
    sent = _post(
        api_client, f"/threads/{thread['id']}/messages", {"text": "hello"}, **headers
    ).json()

    stranger = Client(enforce_csrf_checks=True)
    stranger_headers = _csrf(stranger)
    for response in (
        stranger.get(f"{API}/threads/{thread['id']}"),
        stranger.get(f"{API}/threads/{thread['id']}/messages"),
        stranger.get(f"{API}/runs/{sent['run']['id']}"),
        _post(stranger, f"/threads/{thread['id']}/messages", {"text": "hi"}, **stranger_headers),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    missing = stranger.get(f"{API}/threads/thr_doesnotexist")
    assert (
        missing.status_code == 404
        and missing.json() == stranger.get(f"{API}/threads/{thread['id']}").json()
    )
    assert stranger.get(f"{API}/threads").json()["threads"] == []


def test_cookie_requests_without_csrf_token_are_refused(api_client: Client) -> None:
    thread = _post(api_client, "/threads", {}).json()  # no session cookie yet: no ambient authority
    response = _post(api_client, f"/threads/{thread['id']}/messages", {"text": "hi"})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        ("{not json", 400, "bad_request"),
        (json.dumps({"text": ""}), 422, "invalid_input"),
        (
            json.dumps({"text": "a", "message": {"parts": [{"type": "text", "text": "b"}]}}),
            422,
            "invalid_input",
        ),
        (json.dumps({"message": {"parts": [{"type": "tool-x"}]}}), 422, "invalid_input"),
        (
            json.dumps({"message": {"parts": [{"type": "text", "text": "x"}], "unexpected": 1}}),
            422,
            "invalid_input",
        ),
        (json.dumps({"text": "x" * 300_000}), 413, "payload_too_large"),
    ],
    ids=["malformed-json", "empty-text", "both-forms", "tool-part", "unknown-field", "oversized"],
)
def test_bad_input_gets_a_typed_error_and_stores_nothing(
    api_client: Client, raw: str, status: int, code: str
) -> None:
    headers = _csrf(api_client)
    thread = _post(api_client, "/threads", {}, **headers).json()
    response = api_client.post(
        f"{API}/threads/{thread['id']}/messages",
        data=raw,
        content_type="application/json",
        **headers,
    )
    assert response.status_code == status, response.content
    assert response.json()["error"]["code"] == code
    assert api_client.get(f"{API}/threads/{thread['id']}/messages").json()["messages"] == []


def test_unknown_agent_is_a_typed_error(api_client: Client) -> None:
    response = _post(api_client, "/threads", {"agent": "nope"})
    assert response.status_code == 422
    assert "unknown agent" in response.json()["error"]["message"]


def test_openapi_docs_are_served(api_client: Client) -> None:
    assert api_client.get(f"{API}/docs").status_code == 200
    schema = api_client.get(f"{API}/openapi.json").json()
    assert "/api/pai/threads/{thread_id}/messages" in schema["paths"]
