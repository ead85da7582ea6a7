"""``ui_data``: the only path by which hooks author application ``data-*`` parts.

The writer is closed over the agent's ``ui_data_schemas``: only registered names, parsed by
their schema, strict JSON and a schema fixed point (LC-112..LC-114). What it forwards is
the canonical parsed value, through the same reducer and publisher as model chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pai_agents.lifecycle.metadata import SchemaLike, canonical_value
from pai_agents.messages.types import UIMessageChunk

__all__ = ["InvalidUiData", "UiDataRecorder", "UiDataWriterImpl"]

_ALLOWED_KEYS = frozenset({"type", "id", "data", "transient"})


class InvalidUiData(ValueError):
    """A ``ui_data.write()`` chunk was refused; nothing was forwarded."""


class UiDataWriterImpl:
    """Validates ``data-<name>`` chunks against ``schemas`` and hands them to ``forward``."""

    def __init__(
        self, schemas: Mapping[str, SchemaLike], forward: Callable[[UIMessageChunk], None]
    ) -> None:
        self._schemas = dict(schemas)
        self._forward = forward

    def write(self, chunk: Mapping[str, Any]) -> UIMessageChunk:
        kind = chunk.get("type")
        if (
            not isinstance(kind, str)
            or not kind.startswith("data-")
            or kind.startswith("data-pai-")
        ):
            raise InvalidUiData(f"ui_data writes application data-* chunks only, not {kind!r}")
        name = kind[len("data-") :]
        if name not in self._schemas:
            raise InvalidUiData(f"data part {name!r} is not registered in ui_data_schemas")
        extra = sorted(set(chunk) - _ALLOWED_KEYS)
        if extra or "data" not in chunk:
            raise InvalidUiData(f"a data chunk has type, id, data and transient only: {extra}")
        try:
            data = canonical_value(self._schemas[name], chunk["data"], what=kind)
        except ValueError as exc:
            raise InvalidUiData(str(exc)) from exc
        canonical: UIMessageChunk = {"type": kind, "data": data}
        if chunk.get("id") is not None:
            canonical["id"] = str(chunk["id"])
        if chunk.get("transient"):
            canonical["transient"] = True
        self._forward(canonical)
        return canonical


class UiDataRecorder(UiDataWriterImpl):
    """A writer that keeps what it forwarded (tests)."""

    def __init__(self, schemas: Mapping[str, SchemaLike]) -> None:
        self.chunks: list[UIMessageChunk] = []
        super().__init__(schemas, self.chunks.append)
