"""The checks every lifecycle write passes, whatever backend stores it.

Roles and contract-neutral native parts for ``append`` (LC-011, LC-012), strict JSON or the
agent's schema for every metadata bag (LC-025, AD-033) and partial visibility changes
(LC-013). The facade (:mod:`.thread_facade`) and trusted writers (``pai_threads.trusted``,
history rewrites) share them, so every path accepts and refuses the same writes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from pai_agents.ids import new_id
from pai_agents.json import JsonObject, NotStrictJson, ensure_strict_json
from pai_agents.lifecycle.facade import InvalidLifecycleWrite, LifecycleMessage, MessageVisibility
from pai_agents.lifecycle.metadata import (
    InvalidMetadata,
    MetadataSchemas,
    SchemaLike,
    merge_metadata,
    replace_metadata,
)
from pai_agents.messages.types import UIMessagePart

__all__ = [
    "NATIVE_PART_TYPES",
    "merged_bag",
    "new_lifecycle_message",
    "partial_visibility",
    "validated_bag",
    "with_visibility",
]

# Contract-neutral native parts lifecycle code may author (LC-012).
NATIVE_PART_TYPES = frozenset(
    {"text", "reasoning", "file", "source-url", "source-document", "step-start", "dynamic-tool"}
)
_ROLES = frozenset({"system", "user", "assistant"})


def validated_bag(schema: SchemaLike | None, value: Mapping[str, Any], what: str) -> JsonObject:
    """``value`` as a complete bag: parsed by ``schema``, or strict JSON without one."""
    if schema is not None:
        return replace_metadata(schema, value, what=what)
    try:
        checked = ensure_strict_json(copy.deepcopy(dict(value)), what=what)
    except NotStrictJson as exc:
        raise InvalidMetadata(str(exc)) from exc
    return checked  # type: ignore[return-value]


def merged_bag(
    schema: SchemaLike | None, current: JsonObject, patch: Mapping[str, Any], what: str
) -> JsonObject:
    """``current`` with ``patch``'s top-level keys, validated as a whole object (LC-025)."""
    if schema is not None:
        return merge_metadata(schema, current, patch, what=what)
    if not isinstance(patch, Mapping):
        raise InvalidMetadata(f"{what}: a metadata patch is a JSON object")
    return {**current, **validated_bag(None, patch, what)}


def partial_visibility(
    current: MessageVisibility, change: Mapping[str, bool] | MessageVisibility | None
) -> MessageVisibility:
    """``current`` with only the keys ``change`` supplies (LC-013)."""
    if change is None:
        return current
    if isinstance(change, MessageVisibility):
        return change
    unknown = set(change) - {"transcript", "context"}
    if unknown:
        raise InvalidLifecycleWrite(f"visibility keys are transcript and context: {unknown}")
    return MessageVisibility(
        transcript=bool(change.get("transcript", current.transcript)),
        context=bool(change.get("context", current.context)),
    )


def with_visibility(message: LifecycleMessage, visibility: MessageVisibility) -> LifecycleMessage:
    """``message`` shown as ``visibility`` says, everything else unchanged."""
    return LifecycleMessage(
        id=message.id,
        role=message.role,
        parts=message.parts,
        metadata=message.metadata,
        visibility=visibility,
        private_metadata=message.private_metadata,
    )


def new_lifecycle_message(
    role: str,
    parts: Sequence[UIMessagePart],
    *,
    visibility: Mapping[str, bool] | MessageVisibility | None = None,
    metadata: Mapping[str, Any] | None = None,
    private_metadata: Mapping[str, Any] | None = None,
    schemas: MetadataSchemas | None = None,
) -> LifecycleMessage:
    """The message ``append`` stores, with a new id; :class:`InvalidLifecycleWrite` for a
    tool role, a non-native part, non-JSON content or metadata the schemas refuse."""
    if role not in _ROLES:
        raise InvalidLifecycleWrite(f"append() accepts system, user or assistant, not {role!r}")
    checked: list[UIMessagePart] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in NATIVE_PART_TYPES:
            raise InvalidLifecycleWrite(
                f"append() accepts native contract-neutral parts only, not {kind!r}"
                + (" (write data parts through ui_data)" if str(kind).startswith("data-") else "")
            )
        try:
            checked.append(copy.deepcopy(ensure_strict_json(dict(part), what="part")))  # type: ignore[arg-type]
        except NotStrictJson as exc:
            raise InvalidLifecycleWrite(str(exc)) from exc
    try:
        public = validated_bag(
            schemas.public if schemas else None, metadata or {}, "message metadata"
        )
        private = validated_bag(
            schemas.private if schemas else None, private_metadata or {}, "private metadata"
        )
    except InvalidMetadata as exc:
        raise InvalidLifecycleWrite(str(exc)) from exc
    if "pai" in public:
        raise InvalidLifecycleWrite("metadata.pai is reserved for the runtime")
    return LifecycleMessage(
        id=new_id("msg"),
        role=role,  # type: ignore[arg-type]
        parts=tuple(checked),
        metadata=public,
        visibility=partial_visibility(MessageVisibility(), visibility),
        private_metadata=private,
    )
