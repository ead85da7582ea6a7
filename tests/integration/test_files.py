"""PAI-managed files on the real database and storage: upload and content endpoints, sends with
attachments, the stored reference, the model's expanded input and the client projections
(MF-014, MF-031, MF-038, MF-039, MF-040, MF-041)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from pai_agents import ScriptedModel, ScriptedStep, define_agent
from pai_agents.files import FileRef
from pai_agents.messages.file_refs import FILE_REF_PART
from pai_threads import services
from pai_threads.errors import InvalidInput
from pai_threads.execution.execute import aexecute_run
from pai_threads.identity import Identity
from pai_threads.models import File, Message, Run
from pai_threads.websocket.snapshot import build_snapshot

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
ATTACHMENT_KEYS = {"type", "id", "fileId", "mediaType", "filename", "byteSize", "metadata"}


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Path) -> Iterator[Path]:
    """Uploads go to a throwaway directory, and the limits are small enough to hit."""
    settings.MEDIA_ROOT = str(tmp_path)
    settings.PAI = {**settings.PAI, "FILE_MAX_BYTES": 4096}
    yield tmp_path


@pytest.fixture
def vision(settings: Any) -> ScriptedModel:
    """An agent whose scripted model records every request it gets."""
    model = ScriptedModel(steps=[ScriptedStep.reply("A tiny image.")])
    agent = define_agent("vision", instructions="Describe attachments.", model=model)
    settings.PAI = {**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], agent]}
    return model


def _csrf(client: Client) -> dict[str, str]:
    client.get("/")
    token = client.cookies.get("csrftoken")
    return {"HTTP_X_CSRFTOKEN": token.value} if token else {}


def _upload(
    client: Client,
    content: bytes = PNG,
    *,
    name: str = "cat.png",
    media_type: str = "image/png",
    **fields: str,
) -> Any:
    data: dict[str, Any] = {"file": SimpleUploadedFile(name, content, content_type=media_type)}
    data.update(fields)
    return client.post(f"{API}/files", data=data, **_csrf(client))


def _identity_of(file_id: str) -> Identity:
    return Identity(scope_key=File.objects.get(id=file_id).scope_key)


def _send(identity: Identity, thread_id: str, *parts: dict[str, Any]) -> services.SendResult:
    message = {"role": "user", "parts": list(parts)}
    return services.send(identity, thread_id, message, dispatch=False)


# --------------------------------------------------------------------------- upload, content


def test_mf_038_upload_answers_the_public_attachment_shape(api_client: Client) -> None:
    """MF-038: ``{type: "attachment", id, fileId, mediaType, filename?, byteSize?,
    metadata?}``; the bytes are stored once with their digest, in the caller's partition."""
    response = _upload(api_client, metadata=json.dumps({"caption": "a cat"}))
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == ATTACHMENT_KEYS
    assert body["type"] == "attachment" and body["id"].startswith("att_")
    assert body["mediaType"] == "image/png" and body["filename"] == "cat.png"
    assert body["byteSize"] == len(PNG) and body["metadata"] == {"caption": "a cat"}
    row = File.objects.get(id=body["fileId"])
    assert row.scope_key.startswith("session:") and row.thread_id is None
    assert row.sha256 == hashlib.sha256(PNG).hexdigest()
    with default_storage.open(row.storage_name, "rb") as handle:
        assert handle.read() == PNG

    content = api_client.get(f"{API}/files/{row.id}/content")
    assert content.status_code == 200
    assert b"".join(content.streaming_content) == PNG  # type: ignore[attr-defined]
    assert content["Content-Type"] == "image/png"
    assert content["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in content["Content-Security-Policy"]


def test_upload_bound_to_a_thread_of_another_partition_is_not_found(api_client: Client) -> None:
    other = services.create_thread(Identity(scope_key="user:someone-else"))
    response = _upload(api_client, threadId=other.id)
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert not File.objects.exists()


@pytest.mark.parametrize(
    ("content", "media_type", "fields", "status", "code"),
    [
        (b"x" * 5000, "text/plain", {}, 413, "file_too_large"),
        (b"x" * 80_000, "text/plain", {}, 413, "file_too_large"),
        (b"<script>alert(1)</script>", "text/html", {}, 415, "unsupported_media_type"),
        (b"not a png at all", "image/png", {}, 422, "invalid_input"),
        (b"\xff\xfe\xfa", "text/plain", {}, 422, "invalid_input"),
        (b"", "text/plain", {}, 422, "invalid_input"),
        (b"hello", "text/plain", {"metadata": "[1, 2]"}, 422, "invalid_input"),
        (b"hello", "text/plain", {"mediaType": "not a type"}, 422, "invalid_input"),
    ],
    ids=[
        "too-large",
        "body-too-large",
        "html",
        "mislabelled-png",
        "not-utf8",
        "empty",
        "bad-metadata",
        "bad-type",
    ],
)
def test_bad_uploads_get_typed_errors_and_store_nothing(
    api_client: Client,
    media_root: Path,
    content: bytes,
    media_type: str,
    fields: dict[str, str],
    status: int,
    code: str,
) -> None:
    response = _upload(api_client, content, name="f.bin", media_type=media_type, **fields)
    assert response.status_code == status, response.content
    assert response.json()["error"]["code"] == code
    assert not File.objects.exists()
    assert not any(p.is_file() for p in media_root.rglob("*"))


def test_an_upload_without_a_file_field_is_invalid(api_client: Client) -> None:
    response = api_client.post(f"{API}/files", data={"metadata": "{}"}, **_csrf(api_client))
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_input"


def test_a_cookie_upload_without_csrf_token_is_refused(api_client: Client) -> None:
    api_client.get(f"{API}/threads")  # the session cookie exists: ambient authority
    upload = SimpleUploadedFile("a.txt", b"hi", content_type="text/plain")
    response = api_client.post(f"{API}/files", data={"file": upload})
    assert response.status_code == 403
    assert not File.objects.exists()


def test_another_partition_gets_404_for_the_file_and_cannot_attach_it(
    api_client: Client, bob: Identity
) -> None:
    file_id = _upload(api_client).json()["fileId"]
    stranger = Client(enforce_csrf_checks=True)
    response = stranger.get(f"{API}/files/{file_id}/content")
    assert response.status_code == 404
    assert response.json() == stranger.get(f"{API}/files/fil_missing/content").json()

    thread = services.create_thread(bob)
    with pytest.raises(InvalidInput, match="file not found"):
        _send(bob, thread.id, {"type": "attachment", "fileId": file_id})
    assert not Message.objects.filter(thread=thread).exists()


def test_a_file_bound_to_a_thread_is_attachable_only_there(api_client: Client) -> None:
    first = api_client.post(
        f"{API}/threads", data="{}", content_type="application/json", **_csrf(api_client)
    ).json()
    file_id = _upload(api_client, threadId=first["id"]).json()["fileId"]
    identity = _identity_of(file_id)
    second = services.create_thread(identity)
    with pytest.raises(InvalidInput, match="file not found"):
        _send(identity, second.id, {"type": "attachment", "fileId": file_id})
    sent = _send(identity, first["id"], {"type": "attachment", "fileId": file_id})
    assert sent.created


# --------------------------------------------------------------------------- sends


def test_mf_039_mf_041_mf_014_a_send_stores_a_reference_and_clients_see_an_attachment(
    api_client: Client, wait_for_run: Callable[..., Run]
) -> None:
    """MF-039: the row keeps a provider-neutral reserved part (no URL, no bytes); MF-041: the
    file's scope and storage facts stay in the File row, not in the message; MF-014: the
    send answer, the message list and the websocket snapshot show an attachment part."""
    headers = _csrf(api_client)
    attachment = _upload(api_client, metadata='{"caption": "a cat"}').json()
    thread = api_client.post(
        f"{API}/threads", data="{}", content_type="application/json", **headers
    ).json()
    message = {"parts": [{"type": "text", "text": "What is this?"}, attachment]}
    sent = api_client.post(
        f"{API}/threads/{thread['id']}/messages",
        data=json.dumps({"message": message}),
        content_type="application/json",
        **headers,
    )
    assert sent.status_code == 202, sent.content
    wait_for_run(sent.json()["run"]["id"])

    row = Message.objects.get(thread_id=thread["id"], role="user")
    assert row.parts[1] == {
        "type": FILE_REF_PART,
        "id": attachment["id"],
        "data": {
            "fileId": attachment["fileId"],
            "mediaType": "image/png",
            "filename": "cat.png",
            "byteSize": len(PNG),
            "metadata": {"caption": "a cat"},
        },
    }
    stored = json.dumps(row.parts)
    assert "base64" not in stored and "url" not in stored
    file_row = File.objects.get(id=attachment["fileId"])
    assert file_row.scope_key not in stored and file_row.storage_name not in stored
    assert file_row.sha256 not in stored

    page = api_client.get(f"{API}/threads/{thread['id']}/messages").json()
    snapshot = build_snapshot(_identity_of(attachment["fileId"]), thread["id"])
    for parts in (
        sent.json()["message"]["parts"],
        page["messages"][0]["parts"],
        snapshot["messages"][0]["parts"],
    ):
        assert parts == [{"type": "text", "text": "What is this?"}, attachment]
        assert FILE_REF_PART not in json.dumps(parts)


def test_mf_014_queued_input_shows_the_attachment_too(api_client: Client) -> None:
    file_id = _upload(api_client, b"notes", name="n.txt", media_type="text/plain").json()["fileId"]
    identity = _identity_of(file_id)
    thread = services.create_thread(identity)
    _send(identity, thread.id, {"type": "text", "text": "first"})
    queued = _send(identity, thread.id, {"type": "attachment", "fileId": file_id, "id": "a1"})
    assert queued.queue_item is not None
    [item] = build_snapshot(identity, thread.id)["queue"]["items"]
    assert item["messages"][0]["parts"] == [
        {
            "type": "attachment",
            "id": "a1",
            "fileId": file_id,
            "mediaType": "text/plain",
            "filename": "n.txt",
            "byteSize": 5,
        }
    ]


def test_client_claims_about_the_file_are_replaced_by_the_stored_facts(
    api_client: Client,
) -> None:
    """The stored facts come from the file row: a client cannot relabel or resize a file."""
    attachment = _upload(api_client).json()
    identity = _identity_of(attachment["fileId"])
    thread = services.create_thread(identity)
    forged = {**attachment, "mediaType": "text/html", "byteSize": 1, "filename": "x.html"}
    sent = _send(identity, thread.id, forged)
    assert sent.message is not None
    assert sent.message.parts[0]["data"]["mediaType"] == "image/png"
    assert sent.message.parts[0]["data"]["byteSize"] == len(PNG)


def test_duplicate_attachment_ids_in_one_message_are_invalid(api_client: Client) -> None:
    attachment = _upload(api_client).json()
    identity = _identity_of(attachment["fileId"])
    thread = services.create_thread(identity)
    with pytest.raises(InvalidInput, match="used twice"):
        _send(identity, thread.id, attachment, attachment)


# --------------------------------------------------------------------------- model input


def test_mf_031_mf_040_the_model_gets_the_file_and_the_stored_message_is_unchanged(
    api_client: Client, vision: ScriptedModel
) -> None:
    """MF-040: the default provider expands the reference into an AI SDK file part with a
    data URL of the stored bytes, in place; MF-031: the stored row is not rewritten."""
    attachment = _upload(api_client).json()
    identity = _identity_of(attachment["fileId"])
    thread = services.create_thread(identity, agent="vision")
    sent = _send(
        identity,
        thread.id,
        {"type": "text", "text": "Describe"},
        attachment,
        {"type": "text", "text": "briefly."},
    )
    assert sent.message is not None and sent.run is not None
    before = Message.objects.get(pk=sent.message.pk).parts

    outcome = asyncio.run(aexecute_run(sent.run.id))

    assert outcome is not None and outcome.status == "completed"
    [request] = vision.requests
    encoded = base64.b64encode(PNG).decode()
    assert request.messages[-1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Describe"},
            {
                "type": "file",
                "mediaType": "image/png",
                "data": {"type": "url", "url": f"data:image/png;base64,{encoded}"},
                "filename": "cat.png",
            },
            {"type": "text", "text": "briefly."},
        ],
    }
    assert Message.objects.get(pk=sent.message.pk).parts == before
    assert before[1]["type"] == FILE_REF_PART


class HeaderAndFile:
    """A configured provider: each reference becomes a text header (naming the partition
    and thread it was resolved in) plus a file part."""

    async def expand(self, ref: FileRef) -> Sequence[dict[str, Any]]:
        return [
            {"type": "text", "text": f"[file {ref.filename} {ref.scope_key} {ref.thread_id}]"},
            {"type": "file", "mediaType": ref.media_type, "data": {"type": "text", "text": "x"}},
        ]


def test_mf_040_the_configured_provider_expands_a_reference_into_parts_in_order(
    api_client: Client, vision: ScriptedModel, settings: Any
) -> None:
    settings.PAI = {
        **settings.PAI,
        "FILE_PROVIDER": "tests.integration.test_files.HeaderAndFile",
    }
    attachment = _upload(api_client, b"a,b\n1,2\n", name="t.csv", media_type="text/csv").json()
    identity = _identity_of(attachment["fileId"])
    thread = services.create_thread(identity, agent="vision")
    sent = _send(identity, thread.id, attachment, {"type": "text", "text": "sum it"})
    assert sent.run is not None
    asyncio.run(aexecute_run(sent.run.id))

    [request] = vision.requests
    assert [(c["type"], c.get("text")) for c in request.messages[-1]["content"]] == [
        ("text", f"[file t.csv {identity.scope_key} {thread.id}]"),
        ("file", None),
        ("text", "sum it"),
    ]
