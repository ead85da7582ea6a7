"""Suspension episodes on client tool parts (MF-012, MF-017, MF-023) and the pending-action
sidecar (MF-024), on the real database: HTTP API, websocket snapshot and events, and the
browser client (``static/pai/client.js``, run under Node when it is installed)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from pai_threads import services
from pai_threads.api.serializers import messages_out
from pai_threads.errors import NotFound
from pai_threads.execution import registry
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, Run, Thread
from pai_threads.realtime import delivery
from pai_threads.realtime.buffers import get_buffer
from pai_threads.websocket import commands
from pai_threads.websocket.snapshot import build_snapshot
from tests.support.agents import toolbox
from tests.support.server import REPO_ROOT

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"
EPISODE_KEYS = {
    "id",
    "kind",
    "status",
    "payload",
    "approvalId",
    "resolution",
    "suspendedAt",
    "resolvedAt",
}


@pytest.fixture(autouse=True)
def _toolbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test toolbox agent (an approval tool and a client tool) is served here."""
    agents = {**registry.agents(), toolbox.name: toolbox}
    monkeypatch.setattr(registry, "agents", lambda: agents)


def _waiting(identity: Identity, text: str) -> tuple[Thread, Run, PendingAction]:
    """A toolbox thread whose run waits on one pending action ("approval" or "ask")."""
    thread = services.create_thread(identity, agent="toolbox")
    sent = services.send(
        identity, thread.id, {"parts": [{"type": "text", "text": text}]}, dispatch=False
    )
    assert sent.run is not None
    outcome = asyncio.run(aexecute_run(sent.run.id))
    assert outcome is not None and outcome.status == "waiting"
    return thread, sent.run, PendingAction.objects.get(run=sent.run)


def _tool_part(messages: list[dict[str, Any]], call_id: str) -> tuple[dict[str, Any], ...]:
    return next((m, p) for m in messages for p in m["parts"] if p.get("toolCallId") == call_id)


def _session_identity(client: Client) -> Identity:
    return Identity(scope_key=f"session:{client.session.session_key}", data={"anonymous": True})


def test_mf_023_http_messages_carry_every_episode_and_the_pending_one(
    api_client: Client,
) -> None:
    """MF-023, MF-012: the HTTP messages API joins the call's episodes onto its tool part:
    pending while it waits, then answered (with the resolution) and no longer pending."""
    created = api_client.post(
        f"{API}/threads", data={"agent": "toolbox"}, content_type="application/json"
    )
    assert created.status_code == 201, created.content
    identity = _session_identity(api_client)
    thread_id = created.json()["id"]
    sent = services.send(
        identity, thread_id, {"parts": [{"type": "text", "text": "approval"}]}, dispatch=False
    )
    assert sent.run is not None
    assert asyncio.run(aexecute_run(sent.run.id)) is not None
    action = PendingAction.objects.get(run=sent.run)

    page = api_client.get(f"{API}/threads/{thread_id}/messages").json()["messages"]
    _, part = _tool_part(page, action.tool_call_id)
    [episode] = part["suspensions"]
    assert set(episode) == EPISODE_KEYS  # public fields only: no submitter identity
    assert episode["id"] == action.id and episode["kind"] == "approval"
    assert (episode["status"], episode["payload"]) == ("pending", {"amount": 42})
    assert episode["approvalId"] == part["approval"]["id"]
    assert episode["resolution"] is None and episode["resolvedAt"] is None
    assert part["pendingSuspension"] == episode

    answer = {"approved": False, "reason": "no"}
    services.submit_action(identity, action.id, answer, dispatch=False)
    page = api_client.get(f"{API}/threads/{thread_id}/messages").json()["messages"]
    _, part = _tool_part(page, action.tool_call_id)
    [answered] = part["suspensions"]
    assert answered["status"] == "submitted"
    assert answered["resolution"] == {"approved": False, "reason": "no"}
    assert answered["resolvedAt"] >= answered["suspendedAt"]
    assert part["pendingSuspension"] is None


def test_mf_023_snapshot_joins_and_mf_017_stored_parts_stay_native(alice: Identity) -> None:
    """MF-023, MF-017: the websocket snapshot has the same joined episode (an unresolved
    client tool here); the stored row's part has no projection field, and the projection
    never modifies it."""
    thread, _run, action = _waiting(alice, "ask me")
    snapshot = build_snapshot(alice, thread.id)
    _, part = _tool_part(snapshot["messages"], action.tool_call_id)
    assert part["state"] == "input-available"  # native state: "waiting" is derived
    assert part["pendingSuspension"]["kind"] == "client"
    assert part["pendingSuspension"]["id"] == action.id
    assert part["suspensions"] == [part["pendingSuspension"]]

    row = Message.objects.get(thread=thread, message_id=action.message_id)
    [stored] = [p for p in row.parts if p.get("toolCallId") == action.tool_call_id]
    assert "suspensions" not in stored and "pendingSuspension" not in stored
    before = json.dumps(row.parts, sort_keys=True)
    messages_out([row])
    assert json.dumps(row.parts, sort_keys=True) == before
    assert Message.objects.get(pk=row.pk).parts == row.parts


def test_mf_023_one_query_per_page_and_only_suspended_calls_are_joined(
    alice: Identity,
) -> None:
    """MF-023: projecting a page costs one query however many tool parts it has, none
    for a page without tool parts; a call that never suspended keeps its stored part
    exactly (MF-009); an action joins only onto its own message's part."""
    thread, run, action = _waiting(alice, "approval")
    for index in range(3):
        Message.objects.create(
            thread=thread,
            scope_key=thread.scope_key,
            run=run,
            message_id=f"extra-{index}",
            role="assistant",
            producer=Message.Producer.MODEL,
            parts=[
                # The same call id as the pending one, under another message: not joined.
                {"type": "tool-transfer", "toolCallId": action.tool_call_id, "state": "x"},
                {"type": "dynamic-tool", "toolName": "t", "toolCallId": f"d{index}"},
            ],
        )
    rows = list(Message.objects.filter(thread=thread).order_by("id"))
    with CaptureQueriesContext(connection) as queries:
        projected = messages_out(rows)
    assert len(queries) == 1
    joined = [
        (m["id"], p["toolCallId"]) for m in projected for p in m["parts"] if "suspensions" in p
    ]
    assert joined == [(action.message_id, action.tool_call_id)]
    for row, message in zip(rows, projected, strict=True):
        if row.message_id != action.message_id:
            assert message["parts"] == row.parts

    users = [r for r in rows if r.role == "user"]
    with CaptureQueriesContext(connection) as queries:
        messages_out(users)
    assert len(queries) == 0


def test_mf_023_realtime_events_carry_the_joined_part(
    alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MF-023 over the websocket: the suspending step's ``generation.finished`` carries
    the pending episode; answering with ``submit-action`` publishes the answered message
    (resolved episode) before ``actions.changed``."""
    thread, _run, action = _waiting(alice, "approval")
    buffer = get_buffer()
    state = asyncio.run(buffer.state(thread.id))
    events = asyncio.run(buffer.read(thread.id, after=0, upto=state.last_seq))
    finished = [e for e in events if e["type"] == "generation.finished"]
    _, part = _tool_part([finished[-1]["message"]], action.tool_call_id)
    assert part["pendingSuspension"]["id"] == action.id

    published: list[dict[str, Any]] = []
    monkeypatch.setattr(delivery, "publish_sync", lambda _t, batch: published.extend(batch))
    monkeypatch.setattr(services, "submit_action", _no_dispatch(services.submit_action))
    frame = {"type": "submit-action", "actionId": action.id, "value": {"approved": True}}
    reply = asyncio.run(commands.run_command(alice, thread.id, frame))
    assert reply["type"] == "ack", reply
    kinds = [e["type"] for e in published]
    assert kinds[0] == "message.committed" and "actions.changed" in kinds
    _, part = _tool_part([published[0]["message"]], action.tool_call_id)
    assert part["state"] == "approval-responded"
    assert part["pendingSuspension"] is None
    assert part["suspensions"][0]["resolution"] == {"approved": True}


def _no_dispatch(submit: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *args, **kwargs: submit(*args, **{**kwargs, "dispatch": False})


def test_mf_024_get_pending_action_for_exactly_one_message_and_part(
    alice: Identity, bob: Identity
) -> None:
    """MF-024: ``get_pending_action(message, part)`` finds the approval of exactly that
    message/tool pair (by objects or ids), None for another message, NotFound for another
    scope; ``submit()`` answers it and resumes the run; nothing of it is serialized."""
    thread, run, action = _waiting(alice, "approval")
    messages = build_snapshot(alice, thread.id)["messages"]
    message, part = _tool_part(messages, action.tool_call_id)

    view = services.get_pending_action(alice, thread.id, message, part)
    assert view is not None
    assert (view.id, view.kind, view.input) == (action.id, "approval", {"amount": 42})
    assert view.approval_id == part["approval"]["id"]
    assert services.get_pending_action(alice, thread.id, message["id"], part["toolCallId"])
    assert services.get_pending_action(alice, thread.id, "other-message", part) is None
    assert services.get_pending_action(alice, thread.id, message, "other-call") is None
    with pytest.raises(NotFound):
        services.get_pending_action(bob, thread.id, message, part)
    assert "submit" not in json.dumps(messages)

    answered = view.submit({"approved": True}, dispatch=False)
    assert answered.status == PendingAction.Status.SUBMITTED
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
    assert services.get_pending_action(alice, thread.id, message, part) is None


def test_mf_024_an_unresolved_client_tool_is_a_pending_action(alice: Identity) -> None:
    """MF-024: an unresolved client tool is found like an approval; ``submit()`` with
    its output resolves the call."""
    thread, _run, action = _waiting(alice, "ask me")
    view = services.get_pending_action(
        alice, thread.id, action.message_id, {"toolCallId": action.tool_call_id}
    )
    assert view is not None and view.kind == "client"
    assert view.input == {"question": "Which one?"}
    view.submit({"output": "the blue one"}, dispatch=False)
    row = Message.objects.get(thread=thread, message_id=action.message_id)
    [stored] = [p for p in row.parts if p.get("toolCallId") == action.tool_call_id]
    assert (stored["state"], stored["output"]) == ("output-available", "the blue one")
    assert services.get_pending_action(alice, thread.id, action.message_id, stored) is None


NODE = shutil.which("node")
CLIENT_SCRIPT = r"""
import { ThreadConnection, joinSuspensions } from "%(client)s";

const sent = [];
class FakeSocket {
  constructor() { this.readyState = 1; }
  send(data) { sent.push(JSON.parse(data)); }
  close() {}
}
globalThis.location = { protocol: "http:", host: "test" };
const snapshot = %(snapshot)s;
const conn = new ThreadConnection({ threadId: "t", url: "ws://x/", WebSocketImpl: FakeSocket });
conn.receive({ type: "snapshot", seq: 1, state: snapshot });
const out = {};
const message = conn.state.messages.find((m) => m.parts.some((p) => p.toolCallId === "%(call)s"));
const part = message.parts.find((p) => p.toolCallId === "%(call)s");
const action = conn.getPendingAction(message, part);
out.action = { id: action?.id, kind: action?.kind, hasSubmit: typeof action?.submit };
out.otherMessage = conn.getPendingAction({ id: "other" }, part);
out.otherPart = conn.getPendingAction(message, { toolCallId: "other" });
action.submit({ approved: true }).catch(() => {});
out.sent = sent.at(-1);
// A live re-fold (chunk events) drops the joined fields; the mirror restores them.
const native = ({ suspensions, pendingSuspension, ...p }) => p;
const folded = { ...message, parts: message.parts.map(native) };
const rejoined = joinSuspensions(folded, conn.state.pendingActions, message);
out.rejoined = rejoined.parts.find((p) => p.toolCallId === "%(call)s").pendingSuspension?.id;
// The answer leaves the pending list: no pending episode, the episode itself stays.
conn.receive({ type: "actions.changed", seq: 2, pendingActions: [] });
const after = conn.state.messages.find((m) => m.id === message.id)
  .parts.find((p) => p.toolCallId === "%(call)s");
out.afterPending = after.pendingSuspension;
out.afterEpisodes = after.suspensions.map((e) => e.id);
out.afterAction = conn.getPendingAction(message, part);
// A pending action the projection has not joined yet is mirrored from actions.changed.
const bare = {
  id: "m2", role: "assistant", metadata: {},
  parts: [{ type: "tool-ask_user", toolCallId: "c2", state: "input-available", input: {} }],
};
conn.receive({ type: "message.committed", seq: 3, message: bare });
const act2 = {
  id: "act_2", kind: "client", status: "pending", messageId: "m2", toolCallId: "c2",
  input: {}, approvalId: null, createdAt: "2020-01-01T00:00:00Z",
};
conn.receive({ type: "actions.changed", seq: 4, pendingActions: [act2] });
const mirrored = conn.state.messages.find((m) => m.id === "m2").parts[0];
out.mirrored = mirrored.pendingSuspension;
out.mirroredList = mirrored.suspensions.length;
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run static/pai/client.js")
def test_mf_023_mf_024_browser_client_mirror_and_get_pending_action(
    alice: Identity, tmp_path: Path
) -> None:
    """MF-024 in the browser client: ``thread.getPendingAction(message, part)`` returns the
    action of exactly that pair with ``submit`` (a ``submit-action`` frame), else null;
    MF-023: the reducer keeps ``suspensions`` / ``pendingSuspension`` current from the
    snapshot and ``actions.changed``."""
    thread, _run, action = _waiting(alice, "approval")
    snapshot = build_snapshot(alice, thread.id)
    script = tmp_path / "client_check.mjs"
    script.write_text(
        CLIENT_SCRIPT
        % {
            "client": (REPO_ROOT / "pai_threads/static/pai/client.js").as_uri(),
            "snapshot": json.dumps(snapshot),
            "call": action.tool_call_id,
        }
    )
    done = subprocess.run(
        [str(NODE), str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["action"] == {"id": action.id, "kind": "approval", "hasSubmit": "function"}
    assert out["otherMessage"] is None and out["otherPart"] is None
    assert out["sent"]["type"] == "submit-action"
    assert out["sent"]["actionId"] == action.id
    assert out["sent"]["value"] == {"approved": True}
    assert out["rejoined"] == action.id
    assert out["afterPending"] is None and out["afterEpisodes"] == [action.id]
    assert out["afterAction"] is None
    assert out["mirrored"]["id"] == "act_2" and out["mirrored"]["status"] == "pending"
    assert out["mirrored"]["payload"] == {} and out["mirroredList"] == 1
