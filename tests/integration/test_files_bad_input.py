"""Malformed uploads and files whose bytes are gone: typed errors, never a 500."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from pai_threads.models import File

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/pai"


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Path) -> Iterator[Path]:
    settings.MEDIA_ROOT = str(tmp_path)
    settings.PAI = {**settings.PAI, "FILE_MAX_BYTES": 4096}
    yield tmp_path


def _csrf(client: Client) -> dict[str, str]:
    client.get("/")
    token = client.cookies.get("csrftoken")
    return {"HTTP_X_CSRFTOKEN": token.value} if token else {}


@pytest.mark.parametrize(
    "metadata",
    ["[" * 4096 + "]" * 4096, '{"a":' * 1300 + "1" + "}" * 1300],
    ids=["deep-array", "deep-object"],
)
def test_deeply_nested_upload_metadata_is_422_not_500(api_client: Client, metadata: str) -> None:
    """Metadata nested past Python's recursion limit (within the form field's length) is
    malformed input: a typed 422, never a server error, and nothing is stored."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("note.txt", b"hello", content_type="text/plain")
    response = api_client.post(
        f"{API}/files", data={"file": upload, "metadata": metadata}, **_csrf(api_client)
    )
    assert response.status_code == 422, response.content
    assert response.json()["error"]["code"] == "invalid_input"
    assert not File.objects.exists()


def test_deeply_nested_metadata_from_server_code_is_invalid_input(alice: Any) -> None:
    """The service checks metadata passed by server code the same way (no RecursionError)."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from pai_threads.errors import InvalidInput
    from pai_threads.services import files

    nested: dict[str, Any] = {}
    for _ in range(5000):
        nested = {"a": nested}
    upload = SimpleUploadedFile("note.txt", b"hello", content_type="text/plain")
    with pytest.raises(InvalidInput):
        files.upload_file(alice, upload, metadata=nested)
    assert not File.objects.exists()


def test_file_whose_bytes_are_gone_is_404_not_500(api_client: Client) -> None:
    """A File row that outlived its stored bytes answers the typed 404, not a server error."""
    from django.core.files.storage import default_storage

    from tests.integration.test_files import API, _upload

    response = _upload(api_client)
    assert response.status_code == 201, response.content
    row = File.objects.get(id=response.json()["fileId"])
    default_storage.delete(row.storage_name)

    gone = api_client.get(f"{API}/files/{row.id}/content")
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "not_found"
