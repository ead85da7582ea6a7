"""AI SDK ``file`` content parts as Chat Completions user content.

Chat Completions (and the OpenAI-compatible servers this provider targets) takes images as
``image_url`` parts; other files have no portable part. So images go as ``image_url`` (a data
URL or an http(s) URL), text-like files are decoded and inlined as a text part, a file with a
provider reference for this provider goes as a ``file`` part by id, and anything else becomes
a short text note that says it was omitted, so the model knows an attachment existed.

A part's ``data`` is a string (base64, data URL or http(s) URL), bytes, or the structured
form ``{"type": "url", "url"}`` / ``{"type": "data", "data"}`` / ``{"type": "reference",
"reference": {provider: id}}`` / ``{"type": "text", "text"}`` (what PAI's conversion and
file providers produce).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Final
from urllib.parse import unquote_to_bytes

__all__ = ["MAX_INLINE_TEXT_CHARS", "convert_file_part"]

# An inlined text attachment is cut here (about 50k tokens): a large upload must not swallow
# the context window or the budget of every later step that replays it.
MAX_INLINE_TEXT_CHARS: Final = 200_000

_TEXT_TYPES: Final = frozenset(
    {
        "application/json",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/javascript",
        "application/x-ndjson",
    }
)


def _is_text(media_type: str) -> bool:
    return media_type.startswith("text/") or media_type in _TEXT_TYPES


def _payload(data: Any) -> tuple[str, Any]:
    """``(kind, value)``: kind is "url", "base64", "text", "reference" or "" (unusable)."""
    if isinstance(data, bytes | bytearray):
        return "base64", base64.b64encode(bytes(data)).decode("ascii")
    if isinstance(data, dict):
        kind = data.get("type")
        if kind == "url" and isinstance(data.get("url"), str):
            return "url", data["url"]
        if kind == "data":
            return _payload(data.get("data"))
        if kind == "text" and isinstance(data.get("text"), str):
            return "text", data["text"]
        if kind == "reference" and isinstance(data.get("reference"), dict):
            return "reference", data["reference"]
        return "", None
    if isinstance(data, str) and data:
        if data.startswith(("http://", "https://", "data:")):
            return "url", data
        return "base64", data
    return "", None


def _data_url_bytes(url: str) -> bytes | None:
    header, sep, body = url.partition(",")
    if not sep:
        return None
    try:
        if header.endswith(";base64"):
            return base64.b64decode(body, validate=False)
        return unquote_to_bytes(body)
    except (binascii.Error, ValueError):
        return None


def _text_of(kind: str, value: Any) -> str | None:
    raw: bytes | None = None
    if kind == "text":
        return str(value)
    if kind == "url" and str(value).startswith("data:"):
        raw = _data_url_bytes(str(value))
    elif kind == "base64":
        try:
            raw = base64.b64decode(str(value), validate=False)
        except (binascii.Error, ValueError):
            raw = None
    return None if raw is None else raw.decode("utf-8", errors="replace")


def _omitted(name: str, media_type: str) -> dict[str, Any]:
    return {
        "type": "text",
        "text": f"[Attachment {name!r} ({media_type or 'unknown type'}) omitted: "
        "this model accepts only image attachments.]",
    }


def convert_file_part(part: dict[str, Any], provider: str) -> dict[str, Any]:
    """One Chat Completions content part for an AI SDK ``file`` (or v4 ``image``) part."""
    # "image" is the AI SDK v4 shape; "file" with an image media type is the current one.
    media_type = str(part.get("mediaType") or part.get("mimeType") or "")
    if part.get("type") == "image" and not media_type:
        media_type = "image/*"
    kind, value = _payload(part.get("data") if part.get("type") == "file" else part.get("image"))
    name = str(part.get("filename") or "file")
    if media_type.startswith("image/") and kind in ("url", "base64"):
        url = str(value)
        if kind == "base64":
            concrete = "image/jpeg" if media_type == "image/*" else media_type
            url = f"data:{concrete};base64,{value}"
        image_url: dict[str, Any] = {"url": url}
        options = (part.get("providerOptions") or {}).get(provider) or {}
        if options.get("imageDetail"):
            image_url["detail"] = options["imageDetail"]
        return {"type": "image_url", "image_url": image_url}
    if kind == "reference" and isinstance(value.get(provider), str):
        return {"type": "file", "file": {"file_id": value[provider]}}
    if _is_text(media_type):
        text = _text_of(kind, value)
        if text is not None:
            if len(text) > MAX_INLINE_TEXT_CHARS:
                omitted = len(text) - MAX_INLINE_TEXT_CHARS
                text = f"{text[:MAX_INLINE_TEXT_CHARS]}\n\n[... {omitted} more characters omitted]"
            return {"type": "text", "text": f"Attachment {name!r} ({media_type}):\n\n{text}"}
    return _omitted(name, media_type)
