"""Expanded file parts as Chat Completions input (MF-040): images as ``image_url``, text files
inlined as text, a provider reference by id, anything else a note that it was omitted."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from pai_agents.models.base import ModelRequest
from pai_agents.models.openai_chat import convert_messages


def _user_parts(*parts: dict[str, Any]) -> list[Any]:
    request = ModelRequest(messages=[{"role": "user", "content": list(parts)}])
    [message] = convert_messages(request)
    return list(message["content"])


def _data_url(media_type: str, raw: bytes) -> dict[str, str]:
    return {"type": "url", "url": f"data:{media_type};base64,{base64.b64encode(raw).decode()}"}


def test_mf_040_an_expanded_image_goes_as_image_url() -> None:
    data = _data_url("image/png", b"\x89PNG")
    converted = _user_parts(
        {"type": "text", "text": "what is this?"},
        {"type": "file", "mediaType": "image/png", "filename": "cat.png", "data": data},
    )
    assert converted == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": data["url"]}},
    ]


@pytest.mark.parametrize(
    "data",
    [
        _data_url("text/plain", "héllo\nworld".encode()),
        {"type": "data", "data": base64.b64encode("héllo\nworld".encode()).decode()},
        {"type": "data", "data": "héllo\nworld".encode()},
        {"type": "text", "text": "héllo\nworld"},
        "data:text/plain,h%C3%A9llo%0Aworld",
    ],
)
def test_mf_040_a_text_file_is_inlined_as_text(data: Any) -> None:
    converted = _user_parts(
        {"type": "text", "text": "summarize"},
        {"type": "file", "mediaType": "text/plain", "filename": "notes.txt", "data": data},
    )
    assert converted[1] == {
        "type": "text",
        "text": "Attachment 'notes.txt' (text/plain):\n\nhéllo\nworld",
    }


def test_mf_040_a_large_text_file_is_cut_with_a_note() -> None:
    """A huge text upload is inlined up to MAX_INLINE_TEXT_CHARS and says what was left out,
    so one attachment cannot fill the context of every later step."""
    from pai_agents.models.openai_files import MAX_INLINE_TEXT_CHARS

    text = "z" * (MAX_INLINE_TEXT_CHARS + 123)
    converted = _user_parts(
        {
            "type": "file",
            "mediaType": "text/plain",
            "filename": "big.txt",
            "data": {"type": "text", "text": text},
        }
    )
    inlined = converted[0]["text"]
    assert inlined.count("z") == MAX_INLINE_TEXT_CHARS
    assert inlined.endswith("[... 123 more characters omitted]")


def test_a_provider_reference_for_this_provider_goes_as_a_file_id() -> None:
    reference = {"type": "reference", "reference": {"openai": "file-123"}}
    converted = _user_parts(
        {"type": "text", "text": "read"},
        {"type": "file", "mediaType": "application/pdf", "data": reference},
    )
    assert converted[1] == {"type": "file", "file": {"file_id": "file-123"}}


def test_other_files_become_a_note_that_they_were_omitted() -> None:
    converted = _user_parts(
        {"type": "text", "text": "read"},
        {
            "type": "file",
            "mediaType": "application/pdf",
            "filename": "r.pdf",
            "data": _data_url("application/pdf", b"%PDF-1.7"),
        },
    )
    assert converted[1] == {
        "type": "text",
        "text": "[Attachment 'r.pdf' (application/pdf) omitted: "
        "this model accepts only image attachments.]",
    }
