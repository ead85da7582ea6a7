"""The AI SDK UIMessage grammar: types, chunk validation, the chunk reducer and model conversion."""

from __future__ import annotations

from pai_agents.messages.chunks import CHUNK_FIELDS, InvalidChunk, validate_chunk
from pai_agents.messages.model_messages import (
    DataPartConverter,
    prune_reasoning,
    to_model_messages,
)
from pai_agents.messages.partial_json import parse_partial_json
from pai_agents.messages.reducer import (
    MessageReducer,
    UIMessageStreamError,
    merge_metadata,
    reduce_chunks,
)
from pai_agents.messages.types import (
    FinishReason,
    MessageRole,
    ToolState,
    UIMessage,
    UIMessageChunk,
    UIMessagePart,
)

__all__ = [
    "CHUNK_FIELDS",
    "DataPartConverter",
    "FinishReason",
    "InvalidChunk",
    "MessageReducer",
    "MessageRole",
    "ToolState",
    "UIMessage",
    "UIMessageChunk",
    "UIMessagePart",
    "UIMessageStreamError",
    "merge_metadata",
    "parse_partial_json",
    "prune_reasoning",
    "reduce_chunks",
    "to_model_messages",
    "validate_chunk",
]
