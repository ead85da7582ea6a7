"""File endpoints under ``/api/pai/files``: upload an attachment, read its content.

Scoped like threads: another partition's file id answers 404 exactly like a missing one.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.files.storage import default_storage
from django.http import FileResponse, HttpRequest
from ninja import File, Form, Router, Schema, Status, UploadedFile
from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

from pai_threads.api.auth import IdentityAuth, request_identity
from pai_threads.api.inputs import optional
from pai_threads.api.schemas import errors
from pai_threads.conf import pai_settings
from pai_threads.errors import BadRequest, FileTooLarge, InvalidInput, NotFound
from pai_threads.identity import Identity
from pai_threads.services import files
from pai_threads.services.input_guard import check_json, check_text, loads, lookup_id

__all__ = ["AttachmentOut", "router"]

logger = logging.getLogger("pai.files")

router = Router(tags=["files"])
# Room for the multipart framing and form fields around the file itself.
_MULTIPART_SLACK = 64 * 1024
# Served inline (shown by the browser); everything else downloads.
_INLINE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


class AttachmentOut(Schema):
    """MF-038: ``{type: "attachment", id, fileId, mediaType, filename?, byteSize?, metadata?}``;
    send it back as a message part to attach the file."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    type: str = "attachment"
    id: str
    file_id: str
    media_type: str
    filename: str | None = None
    byte_size: int | None = None
    metadata: dict[str, Any] | None = None


def _accepted_media_types(schema: dict[str, Any]) -> None:
    """``PAI["FILE_MEDIA_TYPES"]`` when it lists exact types (not ``image/*`` families)."""
    accepted = [str(t) for t in pai_settings.FILE_MEDIA_TYPES]
    if not any(t.endswith("/*") for t in accepted):
        schema["enum"] = accepted


def _json_object(schema: dict[str, Any]) -> None:
    schema.clear()
    schema.update({"type": "object", "description": "Public metadata (at most 4 KiB of JSON)."})


class UploadIn(Schema):
    """Form fields beside ``file``; ``metadata`` is a JSON object, shown on attachments.
    Unknown fields are refused, as in JSON bodies (an HTML form may send its CSRF token)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    # Read by Django's CSRF check (an HTML form's token), not documented: a client sends
    # X-CSRFToken instead.
    csrfmiddlewaretoken: SkipJsonSchema[str | None] = Field(
        default=None, alias="csrfmiddlewaretoken"
    )

    thread_id: str | None = optional(max_length=40)
    media_type: str | None = optional(_accepted_media_types, max_length=255)
    filename: str | None = optional(max_length=1000)
    # A JSON object, sent as the part's text (documented as an object with a JSON encoding).
    metadata: str | None = optional(_json_object, max_length=files.MAX_METADATA_BYTES * 2)


_UPLOAD_FORM = {
    "schema": {"additionalProperties": False},
    "encoding": {"metadata": {"contentType": "application/json"}},
}


class UploadAuth(IdentityAuth):
    """Refuses an oversized body by its Content-Length before the CSRF check reads it, and
    a multipart body without any part (only the closing boundary, say) as unreadable."""

    def __call__(self, request: HttpRequest) -> Identity | None:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > pai_settings.FILE_MAX_BYTES + _MULTIPART_SLACK:
            raise FileTooLarge(f"the file is larger than {pai_settings.FILE_MAX_BYTES} bytes")
        identity = super().__call__(request)
        if not request.FILES and not request.POST:  # parsed (or raised 400) here
            raise BadRequest("the multipart body has no parts; send the file as 'file'")
        return identity


def _metadata(raw: str | None) -> dict[str, Any] | None:
    if raw is None or raw == "":
        return None
    try:
        value = loads(raw, "metadata")
    except BadRequest:
        raise InvalidInput("metadata must be a JSON object") from None
    if not isinstance(value, dict):
        raise InvalidInput("metadata must be a JSON object")
    return dict(check_json(value, "metadata"))


def _text(value: str | None, what: str) -> str | None:
    return None if value is None else check_text(value, what)


@router.post(
    "",
    response={201: AttachmentOut, **errors(413, 415)},
    by_alias=True,
    auth=UploadAuth(),
    openapi_extra={"requestBody": {"content": {"multipart/form-data": _UPLOAD_FORM}}},
)
def upload_file(
    request: HttpRequest, file: File[UploadedFile], form: Form[UploadIn]
) -> Status[dict[str, Any]]:
    """Upload a file (multipart field ``file``) into your partition, optionally bound to a
    thread; 413 when too large, 415 for a media type not accepted, 422 when malformed."""
    stored = files.upload_file(
        request_identity(request),
        file,
        media_type=_text(form.media_type, "mediaType"),
        filename=_text(form.filename if form.filename is not None else file.name, "filename"),
        thread_id=None if not form.thread_id else lookup_id(form.thread_id, "thread"),
        metadata=_metadata(form.metadata),
    )
    return Status(201, files.attachment_out(stored))


@router.get(
    "/{file_id}/content",
    response={200: None, **errors()},
    openapi_extra={
        "responses": {
            "200": {
                "description": "The stored bytes, with the file's media type.",
                "content": {"*/*": {}},  # any stored media type, bytes as stored
            }
        }
    },
)
def file_content(request: HttpRequest, file_id: str) -> FileResponse:
    """The stored bytes with their media type (images inline, other files as downloads)."""
    row = files.get_file(request_identity(request), lookup_id(file_id, "file"))
    try:
        content = default_storage.open(row.storage_name, "rb")
    except FileNotFoundError:
        # The row outlived its bytes (storage cleaned by hand): gone, not a server error.
        logger.warning("file %s has no stored content (%s)", row.id, row.storage_name)
        raise NotFound(f"file {file_id} not found") from None
    response = FileResponse(
        content,
        content_type=row.media_type,
        as_attachment=row.media_type not in _INLINE_TYPES,
        filename=row.filename or row.id,
    )
    # Uploaded bytes never run as a page of this origin.
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, max-age=3600"
    return response
