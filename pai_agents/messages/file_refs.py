"""PAI file references: the reserved ``data-pai-file`` part and its public ``attachment`` shape.

A stored message refers to a PAI-managed file by id only, plus the public facts known when
it was sent (media type, name, size, public metadata): provider-neutral, so the stored
message is never rewritten with provider URLs or bytes (MF-039). Clients never see the raw
reserved part: :func:`project_file_refs` turns it into a first-class ``attachment`` part
(MF-014, MF-038). Bytes reach a model only through a file provider, at call time (MF-040).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from pai_agents.messages.types import UIMessage, UIMessagePart

__all__ = [
    "ATTACHMENT_PART",
    "FILE_REF_PART",
    "attachment_part",
    "file_ref_part",
    "file_refs",
    "is_file_ref",
    "project_file_refs",
]

FILE_REF_PART: Final = "data-pai-file"
ATTACHMENT_PART: Final = "attachment"
# The public facts a reference may carry besides ``fileId``, in the attachment's key order.
_OPTIONAL_KEYS: Final = ("filename", "byteSize", "metadata")


def file_ref_part(
    *,
    part_id: str,
    file_id: str,
    media_type: str,
    filename: str | None = None,
    byte_size: int | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> UIMessagePart:
    """The stored reference: a native data part whose ``id`` is the attachment's id."""
    data: dict[str, Any] = {"fileId": file_id, "mediaType": media_type}
    if filename:
        data["filename"] = filename
    if byte_size is not None:
        data["byteSize"] = byte_size
    if metadata:
        data["metadata"] = dict(metadata)
    return {"type": FILE_REF_PART, "id": part_id, "data": data}


def is_file_ref(part: Mapping[str, Any]) -> bool:
    return (
        part.get("type") == FILE_REF_PART
        and isinstance(part.get("data"), dict)
        and isinstance(part["data"].get("fileId"), str)
    )


def attachment_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """The public shape of one stored reference (MF-038); optional facts only when known."""
    data = part["data"]
    attachment: dict[str, Any] = {
        "type": ATTACHMENT_PART,
        "id": str(part.get("id") or data["fileId"]),
        "fileId": data["fileId"],
        "mediaType": str(data.get("mediaType") or "application/octet-stream"),
    }
    for key in _OPTIONAL_KEYS:
        if data.get(key) is not None:
            attachment[key] = data[key]
    return attachment


def file_refs(messages: Iterable[UIMessage]) -> list[UIMessagePart]:
    """Every reference of ``messages``, in transcript and part order."""
    return [part for message in messages for part in message["parts"] if is_file_ref(part)]


def project_file_refs(message: dict[str, Any]) -> dict[str, Any]:
    """The client projection (MF-014): each reference becomes an ``attachment`` part in place.

    Idempotent, and a message without references is returned as is (no copy).
    """
    parts = message.get("parts") or []
    if not any(part.get("type") == FILE_REF_PART for part in parts):
        return message
    projected: list[dict[str, Any]] = []
    for part in parts:
        if part.get("type") != FILE_REF_PART:
            projected.append(part)
        elif is_file_ref(part):  # a malformed reserved part is never shown raw (MF-011)
            projected.append(attachment_part(part))
    return {**message, "parts": projected}
