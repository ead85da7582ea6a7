"""Chunk schema checks against PROTOCOL.md sections 3 and 4.8 (uiMessageChunkSchema)."""

from __future__ import annotations

from typing import Any

import pytest

from pai_agents.messages import CHUNK_FIELDS, InvalidChunk, validate_chunk

PM = {"openai": {"itemId": "x"}}
CITATION = {
    "source": {"type": "source", "sourceType": "url", "id": "s", "url": "https://a"},
    "startIndex": 0,
    "endIndex": 3,
    "citedText": "abc",
}

VALID_CHUNKS: list[dict[str, Any]] = [
    {"type": "start"},
    {"type": "start", "messageId": "m", "messageMetadata": None},
    {"type": "start-step"},
    {"type": "text-start", "id": "t", "providerMetadata": PM},
    {"type": "text-delta", "id": "t", "delta": "x"},
    {"type": "text-end", "id": "t", "citations": [CITATION]},
    {
        "type": "text-end",
        "id": "t",
        "citations": [
            {
                "source": {
                    "type": "source",
                    "sourceType": "document",
                    "id": "d",
                    "mediaType": "application/pdf",
                    "title": "Doc",
                }
            }
        ],
    },
    {"type": "reasoning-start", "id": "r"},
    {"type": "reasoning-delta", "id": "r", "delta": "x"},
    {"type": "reasoning-end", "id": "r"},
    {"type": "custom", "kind": "openai.compaction"},
    {
        "type": "tool-input-start",
        "toolCallId": "c",
        "toolName": "w",
        "inputEncoding": "text",
        "providerExecuted": True,
        "toolMetadata": {"k": [1]},
        "dynamic": False,
        "title": "W",
    },
    {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "{"},
    {"type": "tool-input-available", "toolCallId": "c", "toolName": "w", "input": None},
    {
        "type": "tool-input-error",
        "toolCallId": "c",
        "toolName": "w",
        "input": "{",
        "errorText": "e",
    },
    {
        "type": "tool-approval-request",
        "approvalId": "a",
        "toolCallId": "c",
        "inputSchemaInput": None,
        "isAutomatic": True,
        "signature": "s",
        "reason": "r",
    },
    {"type": "tool-approval-response", "approvalId": "a", "approved": False, "reason": "no"},
    {"type": "tool-output-available", "toolCallId": "c", "output": None, "preliminary": True},
    {"type": "tool-output-error", "toolCallId": "c", "errorText": "e"},
    {"type": "tool-output-denied", "toolCallId": "c"},
    {"type": "source-url", "sourceId": "s", "url": "https://a", "title": "A"},
    {"type": "source-document", "sourceId": "s", "mediaType": "text/plain", "title": "T"},
    {"type": "file", "url": "https://a/f.png", "mediaType": "image/png"},
    {"type": "reasoning-file", "url": "data:image/png;base64,AA", "mediaType": "image/png"},
    {"type": "data-weather", "id": "w", "data": {"t": 1}, "transient": True},
    {"type": "data-", "data": None},
    {
        "type": "steering-message",
        "id": "s",
        "parts": [
            {"type": "text", "text": "hi"},
            {
                "type": "file",
                "mediaType": "image/png",
                "url": "https://a",
                "providerReference": {"o": "f"},
            },
        ],
    },
    {"type": "message-metadata", "messageMetadata": {"a": 1}},
    {"type": "finish-step"},
    {"type": "reset-step"},
    {"type": "finish", "finishReason": "interrupted", "messageMetadata": {"a": 1}},
    {"type": "abort", "reason": "user"},
    {"type": "error", "errorText": "boom"},
]


@pytest.mark.parametrize("chunk", VALID_CHUNKS, ids=lambda c: str(c["type"]))
def test_valid_chunks_pass_unchanged(chunk: dict[str, Any]) -> None:
    assert validate_chunk(chunk) is chunk


def test_every_chunk_type_of_the_table_has_a_valid_example() -> None:
    covered = {"data-" if c["type"].startswith("data-") else c["type"] for c in VALID_CHUNKS}
    assert covered == set(CHUNK_FIELDS)


def test_extra_keys_pass() -> None:
    """PROTOCOL.md 3: unknown keys on a chunk pass the schema."""
    validate_chunk({"type": "text-delta", "id": "t", "delta": "x", "extra": {"any": 1}})


@pytest.mark.parametrize(
    ("chunk", "message"),
    [
        ({"type": "text-start", "id": "t", "providerMetadata": None}, "providerMetadata must be"),
        ({"type": "tool-input-start", "toolCallId": "c", "toolName": "w", "title": None}, "title"),
        ({"type": "start", "messageId": None}, "messageId"),
        ({"type": "data-x", "data": 1, "id": None}, "chunk.id"),
    ],
)
def test_null_in_optional_typed_field_is_rejected(chunk: dict[str, Any], message: str) -> None:
    """(verified) providerMetadata: null is rejected; null is a wrong type for optional fields."""
    with pytest.raises(InvalidChunk, match=message):
        validate_chunk(chunk)


@pytest.mark.parametrize(
    ("chunk", "message"),
    [
        ("not a dict", "JSON object"),
        ({"id": "t"}, "chunk.type must be a string"),
        ({"type": "text"}, "unknown chunk type 'text'"),
        ({"type": "tool-call"}, "unknown chunk type"),
        ({"type": "text-delta", "id": "t"}, "chunk.delta is required"),
        ({"type": "text-delta", "id": 1, "delta": "x"}, "chunk.id must be a string"),
        ({"type": "tool-input-available", "toolCallId": "c", "toolName": "w"}, "input is required"),
        ({"type": "tool-output-available", "toolCallId": "c"}, "output is required"),
        ({"type": "data-x"}, "data is required"),
        ({"type": "tool-approval-response", "approvalId": "a", "approved": "yes"}, "a boolean"),
        ({"type": "finish", "finishReason": "done"}, "finishReason must be one of"),
        (
            {
                "type": "tool-input-start",
                "toolCallId": "c",
                "toolName": "w",
                "inputEncoding": "xml",
            },
            "inputEncoding",
        ),
        ({"type": "text-start", "id": "t", "providerMetadata": {"openai": 1}}, "openai must be"),
        ({"type": "text-start", "id": "t", "providerMetadata": []}, "providerMetadata must be"),
        (
            {"type": "tool-output-error", "toolCallId": "c", "errorText": "e", "toolMetadata": []},
            "JSON",
        ),
        ({"type": "text-end", "id": "t", "citations": {}}, "citations must be an array"),
        (
            {"type": "text-end", "id": "t", "citations": [{"source": {"type": "src"}}]},
            "source.type",
        ),
        ({"type": "text-end", "id": "t", "citations": [{**CITATION, "startIndex": "0"}]}, "number"),
        ({"type": "steering-message", "id": "s", "parts": [{"type": "text"}]}, "text is required"),
        (
            {"type": "tool-output-available", "toolCallId": "c", "output": float("nan")},
            "strict JSON",
        ),
        ({"type": "data-x", "data": (1, 2)}, "strict JSON"),
        (
            {"type": "tool-input-available", "toolCallId": "c", "toolName": 3, "input": 1},
            "toolName",
        ),
    ],
)
def test_invalid_chunks_are_rejected_with_clear_message(chunk: Any, message: str) -> None:
    with pytest.raises(InvalidChunk, match=message):
        validate_chunk(chunk)


def test_invalid_chunk_is_a_value_error() -> None:
    assert issubclass(InvalidChunk, ValueError)


def test_boolean_is_not_a_number() -> None:
    with pytest.raises(InvalidChunk, match="number"):
        validate_chunk(
            {"type": "text-end", "id": "t", "citations": [{**CITATION, "endIndex": True}]}
        )
