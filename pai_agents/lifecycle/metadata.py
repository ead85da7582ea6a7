"""Typed metadata: ``{private, public}`` pydantic schema pairs and their canonical rules.

A schema describes a complete JSON object. At definition time each schema must accept
``{}`` and be canonical: its output is strict JSON, valid as its own input and unchanged by
a second parse (AD-028..AD-030). Every write shallow-merges a sparse top-level patch and
validates the complete merged object (LC-024, LC-025); the stored value is the parsed one.
Private values never reach a client projection (LC-029, LC-030).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

from pydantic import BaseModel, TypeAdapter, ValidationError

from pai_agents.json import JsonObject, JsonValue, NotStrictJson, ensure_strict_json

__all__ = [
    "AgentMetadataSchemas",
    "InvalidMetadata",
    "MetadataBags",
    "MetadataSchemaError",
    "MetadataSchemas",
    "SchemaLike",
    "canonical_value",
    "check_schema",
    "merge_metadata",
    "public_projection",
    "replace_metadata",
]

SchemaLike: TypeAlias = "type[BaseModel] | TypeAdapter[Any]"


class MetadataSchemaError(ValueError):
    """A schema breaks the canonical contract; raised at definition time."""


class InvalidMetadata(ValueError):
    """A value or merged bag failed validation; nothing was written."""


def _adapter(schema: SchemaLike) -> TypeAdapter[Any]:
    if isinstance(schema, TypeAdapter):
        return schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return TypeAdapter(schema)
    raise MetadataSchemaError(f"schemas must be pydantic models or TypeAdapters: {schema!r}")


def canonical_value(schema: SchemaLike, value: Any, *, what: str = "value") -> JsonValue:
    """Parse ``value`` and return the canonical strict-JSON output, or raise ValueError.

    The input must be strict JSON (LC-026); the output must be strict JSON and a fixed
    point: parsing it again yields the same value (LC-113).
    """
    adapter = _adapter(schema)
    try:
        ensure_strict_json(value, what=what)
        output = ensure_strict_json(
            adapter.dump_python(adapter.validate_python(value), mode="json", warnings=False),
            what=what,
        )
        again = adapter.dump_python(
            adapter.validate_python(copy.deepcopy(output)), mode="json", warnings=False
        )
    except (ValidationError, NotStrictJson) as exc:
        raise InvalidMetadata(f"{what}: {exc}") from exc
    if again != output:
        raise InvalidMetadata(f"{what}: the parsed value changes when parsed again")
    return output


def check_schema(schema: SchemaLike, *, what: str) -> JsonObject:
    """Definition-time check; returns the parsed ``{}`` (the initial bag).

    AD-030: besides ``{}`` (which a transform may never touch: a default), the schema's
    output types must be input types, field by field (its JSON schema in serialization mode
    against validation mode), so a str -> int serializer is refused here, while a
    canonicalizing coercion (a Decimal dumped as its string, say) is accepted."""
    try:
        initial = canonical_value(schema, {}, what=what)
    except InvalidMetadata as exc:
        raise MetadataSchemaError(f"{what} must accept {{}} canonically: {exc}") from exc
    if not isinstance(initial, dict):
        raise MetadataSchemaError(f"{what} must describe a JSON object")
    adapter = _adapter(schema)
    try:
        val, ser = adapter.json_schema(mode="validation"), adapter.json_schema(mode="serialization")
    except Exception:
        return initial
    _output_fits(ser, val, ser.get("$defs", {}), val.get("$defs", {}), what)
    return initial


def _resolved(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return cast(Mapping[str, Any], defs.get(ref.removeprefix("#/$defs/"), {}))
    return node


def _branches(node: Mapping[str, Any], defs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    node = _resolved(node, defs)
    subs = node.get("anyOf") or node.get("oneOf")
    if subs:
        return [b for sub in subs for b in _branches(sub, defs)]
    return [node]


def _kinds(node: Mapping[str, Any]) -> set[str]:
    kind = node.get("type")
    if kind is None:
        return {"any"}
    return set(kind) if isinstance(kind, list) else {str(kind)}


def _output_fits(
    ser: Mapping[str, Any],
    val: Mapping[str, Any],
    ser_defs: Mapping[str, Any],
    val_defs: Mapping[str, Any],
    path: str,
) -> None:
    """Raise :class:`MetadataSchemaError` where an output type is not an input type."""
    outputs, inputs = _branches(ser, ser_defs), _branches(val, val_defs)
    accepted = set().union(*(_kinds(b) for b in inputs))
    if "any" in accepted:
        return
    if "number" in accepted:
        accepted.add("integer")
    for out in outputs:
        kinds = _kinds(out)
        if "any" in kinds:
            continue
        wrong = kinds - accepted
        if wrong:
            raise MetadataSchemaError(
                f"{path}: the schema outputs {sorted(wrong)} where it accepts {sorted(accepted)}"
                " (a transform whose output is not valid input, AD-030)"
            )
        for inp in inputs:
            if "object" in kinds and "object" in _kinds(inp):
                props = inp.get("properties", {})
                for key, sub in out.get("properties", {}).items():
                    if key in props:
                        _output_fits(sub, props[key], ser_defs, val_defs, f"{path}.{key}")
            if "array" in kinds and "array" in _kinds(inp) and "items" in out and "items" in inp:
                _output_fits(out["items"], inp["items"], ser_defs, val_defs, f"{path}[]")


@dataclass(frozen=True, kw_only=True)
class MetadataSchemas:
    """A raw ``{private, public}`` schema pair for run, thread or message metadata.

    Construction runs the definition-time checks (AD-027..AD-030); :meth:`initial` parses
    ``{}`` anew for every run, so default factories are not shared (AD-031, AD-032).
    """

    private: SchemaLike
    public: SchemaLike

    def __post_init__(self) -> None:
        check_schema(self.private, what="private metadata schema")
        check_schema(self.public, what="public metadata schema")

    def initial(self) -> MetadataBags:
        return MetadataBags(
            private=check_schema(self.private, what="private metadata schema"),
            public=check_schema(self.public, what="public metadata schema"),
        )


def merge_metadata(
    schema: SchemaLike, current: Mapping[str, Any], patch: Mapping[str, Any], *, what: str
) -> JsonObject:
    """Shallow top-level merge, then full-object validation (LC-024, LC-025)."""
    if not isinstance(patch, Mapping):
        raise InvalidMetadata(f"{what}: a metadata patch is a JSON object")
    try:
        ensure_strict_json(dict(patch), what=what)
    except NotStrictJson as exc:
        raise InvalidMetadata(str(exc)) from exc
    return replace_metadata(schema, {**current, **copy.deepcopy(dict(patch))}, what=what)


def replace_metadata(schema: SchemaLike, value: Mapping[str, Any], *, what: str) -> JsonObject:
    """The canonical whole bag for ``value`` (LC-027)."""
    if not isinstance(value, Mapping):
        raise InvalidMetadata(f"{what}: metadata is a JSON object")
    result = canonical_value(schema, dict(value), what=what)
    if not isinstance(result, dict):
        raise InvalidMetadata(f"{what}: metadata is a JSON object")
    return result


@dataclass(frozen=True, kw_only=True)
class MetadataBags:
    """The two stored bags of one run, thread or message."""

    private: JsonObject
    public: JsonObject


def public_projection(bags: MetadataBags) -> JsonObject:
    """The only client view: a copy of the public bag; private keys are never read."""
    return copy.deepcopy(bags.public)


@dataclass(frozen=True, kw_only=True)
class AgentMetadataSchemas:
    """An agent's run, thread and message schema pairs (``None``: strict JSON only)."""

    run: MetadataSchemas | None = None
    thread: MetadataSchemas | None = None
    message: MetadataSchemas | None = None

    def run_initial(self) -> MetadataBags:
        """Fresh parsed ``{}`` bags for a new run (AD-031, AD-032)."""
        return self.run.initial() if self.run else MetadataBags(private={}, public={})

    def thread_initial(self) -> MetadataBags:
        return self.thread.initial() if self.thread else MetadataBags(private={}, public={})
