"""PAI-managed files: checked uploads, scoped lookups, and attachment references in sends.

Files are partitioned like threads: every lookup filters by the identity's ``scope_key``, so
another partition's file is indistinguishable from a missing one. A send refers to a file
with an ``attachment`` part; the stored message keeps a provider-neutral ``data-pai-file``
reference (MF-039), and bytes reach a model only through the file provider (MF-040).
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
import unicodedata
from collections.abc import Mapping
from typing import Any, Final

from django.core.files.base import File as DjangoFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from pai_agents.ids import new_id
from pai_agents.json import NotStrictJson, ensure_strict_json
from pai_agents.messages.file_refs import file_ref_part
from pai_threads.conf import pai_settings
from pai_threads.errors import FileTooLarge, InvalidInput, NotFound, UnsupportedMediaType
from pai_threads.identity import Identity
from pai_threads.models import File, Thread

__all__ = [
    "STORAGE_PREFIX",
    "attachment_out",
    "get_file",
    "media_type_allowed",
    "reference_attachments",
    "upload_file",
]

STORAGE_PREFIX: Final = "pai/files"
MAX_FILENAME: Final = 255
MAX_METADATA_BYTES: Final = 4096
MAX_PART_ID: Final = 100
_MEDIA_TYPE: Final = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*")
# Leading bytes of formats a provider decodes: a mislabelled file would fail every run that
# sends it, so it is refused at upload instead (422).
_SIGNATURES: Final[dict[str, tuple[bytes, ...]]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "application/pdf": (b"%PDF-",),
}


def normalize_media_type(value: str) -> str:
    """``Text/Plain; charset=utf-8`` -> ``text/plain`` ("" when it is no media type)."""
    media_type = value.split(";", 1)[0].strip().lower()
    return media_type if _MEDIA_TYPE.fullmatch(media_type) else ""


def media_type_allowed(media_type: str) -> bool:
    family = media_type.split("/", 1)[0] + "/*"
    allowed = pai_settings.FILE_MEDIA_TYPES
    return media_type in allowed or family in allowed or "*/*" in allowed


def _filename(name: str) -> str:
    """The last path segment, without control characters, at most 255 characters."""
    base = os.path.basename(name.replace("\\", "/"))
    cleaned = "".join(c for c in base if unicodedata.category(c)[0] != "C").strip()
    return cleaned[:MAX_FILENAME]


def _metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInput("metadata must be an object")
    checked = dict(metadata)
    try:
        ensure_strict_json(checked, what="metadata")
        size = len(json.dumps(checked, separators=(",", ":")))
    except NotStrictJson as exc:
        raise InvalidInput(str(exc)) from exc
    except RecursionError:
        raise InvalidInput("metadata is nested too deeply") from None
    if size > MAX_METADATA_BYTES:
        raise InvalidInput(f"metadata must be at most {MAX_METADATA_BYTES} bytes of JSON")
    return checked


def _check_content(upload: DjangoFile, media_type: str) -> tuple[int, str]:
    """Size and sha256 of the bytes, read once; the signature and UTF-8 checks on the way."""
    digest = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")() if media_type.startswith("text/") else None
    size, head = 0, b""
    upload.seek(0)
    for chunk in upload.chunks():
        size += len(chunk)
        if size > pai_settings.FILE_MAX_BYTES:  # the declared size may lie
            raise FileTooLarge(f"the file is larger than {pai_settings.FILE_MAX_BYTES} bytes")
        digest.update(chunk)
        if len(head) < 16:
            head = (head + chunk)[:16]
        if decoder is not None:
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                raise InvalidInput(f"a {media_type} file must be UTF-8 text") from None
    if decoder is not None:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise InvalidInput(f"a {media_type} file must be UTF-8 text") from None
    signatures = _SIGNATURES.get(media_type)
    webp = media_type == "image/webp" and not (head[:4] == b"RIFF" and head[8:12] == b"WEBP")
    if webp or (signatures and not head.startswith(signatures)):
        raise InvalidInput(f"the file's content is not {media_type}")
    upload.seek(0)
    return size, digest.hexdigest()


def upload_file(
    identity: Identity,
    upload: DjangoFile,
    *,
    media_type: str | None = None,
    filename: str | None = None,
    thread_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> File:
    """Check and store an upload in the identity's partition (optionally bound to a thread).

    Too large is :class:`FileTooLarge`, a media type not accepted is
    :class:`UnsupportedMediaType`, anything else wrong :class:`InvalidInput`; nothing is
    stored then. ``media_type`` defaults to the upload's declared type.
    """
    thread = _thread(identity, thread_id)
    declared = upload.size
    if declared is not None and declared > pai_settings.FILE_MAX_BYTES:
        raise FileTooLarge(f"the file is larger than {pai_settings.FILE_MAX_BYTES} bytes")
    raw_type = media_type or getattr(upload, "content_type", None) or "application/octet-stream"
    kind = normalize_media_type(raw_type)
    if not kind:
        raise InvalidInput(f"{raw_type!r} is not a media type")
    if not media_type_allowed(kind):
        raise UnsupportedMediaType(f"files of type {kind} are not accepted")
    name = _filename(filename if filename is not None else (upload.name or ""))
    public = _metadata(metadata)
    size, sha256 = _check_content(upload, kind)
    if size == 0:
        raise InvalidInput("the file is empty")
    file_id = new_id("fil")
    stored = default_storage.save(f"{STORAGE_PREFIX}/{file_id}", upload)
    try:
        return File.objects.create(
            id=file_id,
            scope_key=identity.scope_key,
            thread=thread,
            media_type=kind,
            filename=name,
            byte_size=size,
            sha256=sha256,
            storage_name=stored,
            metadata=public,
        )
    except BaseException:
        default_storage.delete(stored)  # no row, no orphan bytes
        raise


def _thread(identity: Identity, thread_id: str | None) -> Thread | None:
    if not thread_id:
        return None
    try:
        return Thread.objects.get(id=thread_id, scope_key=identity.scope_key)
    except Thread.DoesNotExist:
        raise NotFound("thread not found") from None


def get_file(identity: Identity, file_id: str) -> File:
    try:
        return File.objects.get(id=file_id, scope_key=identity.scope_key)
    except File.DoesNotExist:
        raise NotFound("file not found") from None


def attachment_out(file: File, *, part_id: str | None = None) -> dict[str, Any]:
    """The public attachment shape of a file (MF-038); ``id`` is the part id to send."""
    out: dict[str, Any] = {
        "type": "attachment",
        "id": part_id or new_id("att"),
        "fileId": file.id,
        "mediaType": file.media_type,
        "byteSize": file.byte_size,
    }
    if file.filename:
        out["filename"] = file.filename
    if file.metadata:
        out["metadata"] = file.metadata
    return out


def reference_attachments(thread: Thread, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A send's ``attachment`` parts as stored references, in place (MF-039).

    Each must name a file of the thread's partition (and of this thread, when the file is
    bound to one); the public facts come from the file row, never from the client.
    """
    wanted = {p.get("fileId") for p in parts if p.get("type") == "attachment"}
    if not wanted:
        return parts
    rows = {f.id: f for f in File.objects.filter(id__in=wanted, scope_key=thread.scope_key)}
    stored: list[dict[str, Any]] = []
    part_ids: set[str] = set()
    for index, part in enumerate(parts):
        if part.get("type") != "attachment":
            stored.append(part)
            continue
        row = rows.get(part.get("fileId"))  # type: ignore[arg-type]  # None finds nothing
        if row is None or (row.thread_id is not None and row.thread_id != thread.id):
            raise InvalidInput(f"parts[{index}]: file not found")
        part_id = part.get("id") or new_id("att")
        if not isinstance(part_id, str) or not 0 < len(part_id) <= MAX_PART_ID:
            raise InvalidInput(f"parts[{index}]: id must be a string of 1 to 100 characters")
        if part_id in part_ids:
            raise InvalidInput(f"parts[{index}]: attachment id {part_id!r} is used twice")
        part_ids.add(part_id)
        stored.append(
            file_ref_part(
                part_id=part_id,
                file_id=row.id,
                media_type=row.media_type,
                filename=row.filename or None,
                byte_size=row.byte_size,
                metadata=row.metadata or None,
            )
        )
    return stored


@receiver(post_delete, sender=File)
def _delete_stored_bytes(sender: type[File], instance: File, **_: Any) -> None:
    """A deleted row (or its thread) takes its bytes along, once the deletion commits."""
    name = instance.storage_name
    transaction.on_commit(lambda: default_storage.delete(name))
