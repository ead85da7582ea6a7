"""Acceptance (issue 4) through the HTTP API, with runs on a real Celery worker process.

Approvals and client tools (suspend, wait, answer once, resume), cancel during a long
provider stream (the fake OpenAI server sees the client hang up), and regenerate.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from pai_threads.models import Message, PendingAction, Run
from tests.support.durable_harness import (
    assert_transcript_integrity,
    celery_dispatch,
    logs,
    start_workers,
    stop_workers,
    text_of,
    tool_parts,
    wait_until,
)
from tests.support.fake_openai import (
    Chunks,
    FakeOpenAIServer,
    SSEResponse,
    text_chunks,
    text_response,
)
from tests.support.workers import CeleryWorker

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.redis,
    pytest.mark.django_db(transaction=True),
]

API = "/api/pai"


class Api:
    """A browser-like API client (session identity, CSRF enforced)."""

    def __init__(self) -> None:
        self.client = Client(enforce_csrf_checks=True)
        self.headers = {"HTTP_X_CSRFTOKEN": self.client.get(f"{API}/session").json()["csrfToken"]}

    def get(self, path: str) -> Any:
        return self.client.get(f"{API}{path}")

    def post(self, path: str, body: Any = None) -> Any:
        return self.client.post(
            f"{API}{path}",
            data=json.dumps(body or {}),
            content_type="application/json",
            **self.headers,
        )

    def thread(self, agent: str) -> str:
        created = self.post("/threads", {"agent": agent})
        assert created.status_code == 201, created.content
        return str(created.json()["id"])

    def send(self, thread_id: str, text: str) -> dict[str, Any]:
        sent = self.post(f"/threads/{thread_id}/messages", {"text": text})
        assert sent.status_code == 202, sent.content
        return dict(sent.json())


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def worker(
    transactional_db: None, redis_url: str, tmp_path: Path, openai_server: FakeOpenAIServer
) -> Iterator[CeleryWorker]:
    with celery_dispatch(redis_url):
        (started,) = start_workers(
            1,
            redis_url=redis_url,
            log_dir=tmp_path,
            concurrency=4,
            PAI_TEST_OPENAI_BASE_URL=openai_server.base_url,
        )
        try:
            yield started
        finally:
            stop_workers([started])


def _wait_status(api: Api, run_id: str, statuses: set[str], worker: CeleryWorker) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        run = api.get(f"/runs/{run_id}").json()
        return dict(run) if run["status"] in statuses else None

    return wait_until(
        probe,
        timeout=30,
        what=f"run {run_id} to be {statuses} (now {Run.objects.get(pk=run_id).status})",
        workers=[worker],
    )


def test_approval_end_to_end(worker: CeleryWorker, tmp_path: Path) -> None:
    alice, mallory = Api(), Api()
    effects = tmp_path / "transfers.log"
    thread_id = alice.thread("approver")
    run_id = alice.send(thread_id, f"transfer 42 {effects}")["run"]["id"]

    run = _wait_status(alice, run_id, {"waiting", "completed", "failed"}, worker)
    assert run["status"] == "waiting", run
    (action,) = alice.get("/actions").json()
    assert action["kind"] == "approval" and action["toolName"] == "transfer"
    assert action["runId"] == run_id and action["input"] == {"amount": 42, "path": str(effects)}
    state = alice.get(f"/threads/{thread_id}/state").json()
    assert [a["id"] for a in state["actions"]] == [action["id"]]
    assert not effects.exists()

    # Another identity can neither see nor answer it.
    assert mallory.get("/actions").json() == []
    stolen = mallory.post(f"/actions/{action['id']}", {"approved": True})
    assert stolen.status_code == 404, stolen.content

    approved = alice.post(f"/actions/{action['id']}", {"approved": True})
    assert approved.status_code == 200, approved.content
    assert approved.json()["status"] == "submitted"
    again = alice.post(f"/actions/{action['id']}", {"approved": False})
    assert again.status_code == 409, again.content
    assert again.json()["error"]["code"] == "action_conflict"

    run = _wait_status(alice, run_id, {"completed", "failed", "cancelled"}, worker)
    assert run["status"] == "completed", f"{run}\n{logs([worker])}"
    assert effects.read_text().splitlines() == ["transfer 42"]  # executed exactly once
    rows = assert_transcript_integrity(thread_id)
    assert [m.role for m in rows] == ["user", "assistant", "assistant"]
    (call,) = tool_parts(rows[1].parts)
    assert call["state"] == "output-available" and call["output"] == {"sent": 42}
    assert call["approval"]["approved"] is True
    assert '"sent": 42' in text_of(rows[2].parts)
    submitted = PendingAction.objects.get(pk=action["id"])
    assert submitted.submitted_by and submitted.submitted_by["scopeKey"].startswith("session:")
    assert alice.get("/actions").json() == []


def test_denied_approval_is_a_tool_error_the_model_sees(
    worker: CeleryWorker, tmp_path: Path
) -> None:
    api = Api()
    effects = tmp_path / "transfers.log"
    thread_id = api.thread("approver")
    run_id = api.send(thread_id, f"transfer 7 {effects}")["run"]["id"]
    assert _wait_status(api, run_id, {"waiting", "failed"}, worker)["status"] == "waiting"
    (action,) = api.get(f"/actions?thread_id={thread_id}").json()

    denied = api.post(f"/actions/{action['id']}", {"approved": False, "reason": "too risky"})
    assert denied.status_code == 200, denied.content
    run = _wait_status(api, run_id, {"completed", "failed", "cancelled"}, worker)
    assert run["status"] == "completed", f"{run}\n{logs([worker])}"
    assert not effects.exists()  # never executed
    rows = assert_transcript_integrity(thread_id)
    (call,) = tool_parts(rows[1].parts)
    assert call["state"] == "output-denied", call
    # The model's next request carried the denial and its reason.
    assert "too risky" in text_of(rows[2].parts), rows[2].parts


def test_client_tool_result_submitted_through_the_api(worker: CeleryWorker) -> None:
    api = Api()
    thread_id = api.thread("approver")
    run_id = api.send(thread_id, "color")["run"]["id"]
    assert _wait_status(api, run_id, {"waiting", "failed"}, worker)["status"] == "waiting"
    (action,) = api.get("/actions").json()
    assert action["kind"] == "client" and action["toolName"] == "pick_color"
    bad = api.post(f"/actions/{action['id']}", {"approved": True})
    assert bad.status_code == 422, bad.content  # a client tool needs an output

    answered = api.post(f"/actions/{action['id']}", {"output": {"color": "blue"}})
    assert answered.status_code == 200, answered.content
    run = _wait_status(api, run_id, {"completed", "failed", "cancelled"}, worker)
    assert run["status"] == "completed", f"{run}\n{logs([worker])}"
    rows = assert_transcript_integrity(thread_id)
    (call,) = tool_parts(rows[1].parts)
    assert call["state"] == "output-available" and call["output"] == {"color": "blue"}
    assert "blue" in text_of(rows[2].parts)


def test_cancelling_a_waiting_run_cancels_its_actions(worker: CeleryWorker, tmp_path: Path) -> None:
    api = Api()
    thread_id = api.thread("approver")
    run_id = api.send(thread_id, f"transfer 1 {tmp_path / 'x.log'}")["run"]["id"]
    assert _wait_status(api, run_id, {"waiting", "failed"}, worker)["status"] == "waiting"
    (action,) = api.get("/actions").json()
    cancelled = api.post(f"/runs/{run_id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert PendingAction.objects.get(pk=action["id"]).status == "cancelled"
    late = api.post(f"/actions/{action['id']}", {"approved": True})
    assert late.status_code == 409, late.content
    rows = assert_transcript_integrity(thread_id)
    (call,) = tool_parts(rows[1].parts)
    assert call["state"] == "output-error" and call["toolMetadata"]["pai"]["source"] == "cancel"


def test_cancel_during_a_long_stream(worker: CeleryWorker, openai_server: FakeOpenAIServer) -> None:
    words = " ".join(f"word{i}" for i in range(400))
    second: Chunks = [*text_response("Second answer.")]
    openai_server.add(
        SSEResponse(chunks=text_chunks(words), delay=0.03),  # ~12 s if nobody stops it
        second,
    )
    api = Api()
    thread_id = api.thread("remote")
    run_id = api.send(thread_id, "first")["run"]["id"]
    wait_until(
        lambda: openai_server.exchanges and openai_server.exchanges[0].chunks_sent > 20,
        timeout=20,
        what="the provider stream to be under way",
        workers=[worker],
    )
    queued = api.post(f"/threads/{thread_id}/messages", {"text": "second"})
    assert queued.status_code == 202 and queued.json()["queued"] is not None, queued.content

    cancelled = api.post(f"/runs/{run_id}/cancel")
    assert cancelled.status_code == 200, cancelled.content
    exchange = openai_server.exchanges[0]
    closed = exchange.client_disconnected.wait(10)
    state = Run.objects.values("status", "cancel_requested_at", "lease_expires_at").get(pk=run_id)
    assert closed, f"the provider stream was not closed; run {state}\n{logs([worker])}"
    assert not exchange.completed
    run = _wait_status(api, run_id, {"cancelled", "completed", "failed"}, worker)
    assert run["status"] == "cancelled", f"{run}\n{logs([worker])}"

    next_run = Run.objects.filter(thread_id=thread_id).exclude(pk=run_id).get()
    done = _wait_status(api, next_run.id, {"completed", "failed", "cancelled"}, worker)
    assert done["status"] == "completed", f"{done}\n{logs([worker])}"
    rows = assert_transcript_integrity(thread_id)
    assert [(m.role, m.run_id) for m in rows] == [
        ("user", run_id),
        ("assistant", run_id),
        ("user", next_run.id),
        ("assistant", next_run.id),
    ]
    partial = text_of(rows[1].parts)
    assert partial and words.startswith(partial) and partial != words
    assert text_of(rows[3].parts) == "Second answer."
    listed = api.get(f"/threads/{thread_id}/messages").json()["messages"]
    assert [m["metadata"]["pai"]["status"] for m in listed] == ["committed"] * 4


def test_regenerate_removes_the_previous_answer(worker: CeleryWorker) -> None:
    api = Api()
    thread_id = api.thread("durable")
    for text in ("one", "two"):
        run_id = api.send(thread_id, text)["run"]["id"]
        assert _wait_status(api, run_id, {"completed", "failed"}, worker)["status"] == "completed"
    before = api.get(f"/threads/{thread_id}/messages").json()["messages"]
    first_answer, old_answer = text_of(before[1]["parts"]), text_of(before[3]["parts"])
    first_serial = first_answer.split("(answer ")[1].split(";")[0]
    old_serial = old_answer.split("(answer ")[1].split(";")[0]
    assert old_answer.endswith(f"context answers: [{first_serial}])")

    regenerated = api.post(f"/threads/{thread_id}/regenerate")
    assert regenerated.status_code == 202, regenerated.content
    assert regenerated.json()["initiator"] == "regenerate"
    run = _wait_status(api, regenerated.json()["id"], {"completed", "failed"}, worker)
    assert run["status"] == "completed", f"{run}\n{logs([worker])}"

    after = api.get(f"/threads/{thread_id}/messages").json()["messages"]
    assert [m["id"] for m in after[:3]] == [m["id"] for m in before[:3]]
    assert before[3]["id"] not in [m["id"] for m in after]
    assert len(after) == 4 and after[3]["metadata"]["pai"]["runId"] == regenerated.json()["id"]
    new_answer = text_of(after[3]["parts"])
    # The model's request no longer held the removed answer, only the first one.
    assert new_answer.startswith("Echo: two ")
    assert new_answer.endswith(f"context answers: [{first_serial}])"), new_answer
    assert old_serial not in new_answer.split("context answers:")[1]
    removed = Message.objects.get(thread_id=thread_id, message_id=before[3]["id"])
    assert not removed.in_transcript and not removed.in_context
