"""File providers: how stored file references become model input, at call time only.

Stored messages keep provider-neutral ``data-pai-file`` references (MF-039). Before each
provider call the engine hands every reference in the context to the configured
:class:`FileProvider`, which returns the model content parts it stands for: usually one AI
SDK ``file`` part, but any number of text or file parts, kept in order (MF-040). The
stored messages are never changed (MF-031), and hooks keep seeing the reference (LC-051).

The provider is resolved once per reference per call (a file referenced twice is read once);
an implementation may cache, since PAI-managed files are immutable.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pai_agents.messages.file_refs import file_refs, is_file_ref
from pai_agents.messages.model_messages import DataPartConverter, to_model_messages
from pai_agents.messages.types import UIMessage, UIMessagePart
from pai_agents.models.base import ModelMessage

__all__ = ["FileProvider", "FileRef", "file_converter", "to_model_messages_with_files"]

# One AI SDK model content part: {"type": "text", "text"} or {"type": "file", "mediaType",
# "data", "filename"?}.
ModelContentPart = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class FileRef:
    """One reference to expand, with the partition it must be resolved in.

    ``scope_key`` is the run's storage partition: a provider must never resolve a file of
    another partition, whatever the id says.
    """

    file_id: str
    scope_key: str
    thread_id: str
    media_type: str
    filename: str | None = None
    part_id: str | None = None


@runtime_checkable
class FileProvider(Protocol):
    """Expands one reference into model content parts (MF-040)."""

    async def expand(self, ref: FileRef) -> Sequence[ModelContentPart]:
        """The parts the model sees in place of ``ref``, in order; empty drops it."""
        ...


def _ref(part: UIMessagePart, *, scope_key: str, thread_id: str) -> FileRef:
    data: Mapping[str, Any] = part["data"]
    return FileRef(
        file_id=data["fileId"],
        scope_key=scope_key,
        thread_id=thread_id,
        media_type=str(data.get("mediaType") or "application/octet-stream"),
        filename=data.get("filename"),
        part_id=part.get("id"),
    )


async def file_converter(
    messages: Sequence[UIMessage], files: FileProvider, *, scope_key: str, thread_id: str
) -> DataPartConverter:
    """Expand every reference of ``messages`` now, and return the synchronous data-part
    converter that puts the expansions in place during conversion."""
    refs: dict[str, FileRef] = {}
    for part in file_refs(messages):
        ref = _ref(part, scope_key=scope_key, thread_id=thread_id)
        refs.setdefault(ref.file_id, ref)
    expanded = await asyncio.gather(*(files.expand(ref) for ref in refs.values()))
    by_id = dict(zip(refs, expanded, strict=True))

    def convert(part: UIMessagePart) -> list[ModelContentPart] | None:
        if not is_file_ref(part):
            return None
        # Copies: a provider's cached parts must not be shared with a patched request.
        return copy.deepcopy(list(by_id.get(part["data"]["fileId"], ())))

    return convert


async def to_model_messages_with_files(
    messages: Sequence[UIMessage],
    files: FileProvider | None,
    *,
    scope_key: str,
    thread_id: str,
) -> list[ModelMessage]:
    """:func:`~pai_agents.messages.to_model_messages` with file references materialized
    (MF-031). Without a provider, references are dropped like any unconverted data part."""
    if files is None or not file_refs(messages):
        return to_model_messages(messages)
    convert = await file_converter(messages, files, scope_key=scope_key, thread_id=thread_id)
    return to_model_messages(messages, convert_data_part=convert)
