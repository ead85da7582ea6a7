"""Metadata schema pairs (AD-027..AD-032, LC-024..LC-026, LC-029) and ui_data (LC-112..114)."""

from __future__ import annotations

from datetime import date

import pytest
from pydantic import BaseModel, Field, TypeAdapter, field_validator

from pai_agents.lifecycle import (
    InvalidMetadata,
    InvalidUiData,
    MetadataBags,
    MetadataSchemaError,
    MetadataSchemas,
    canonical_value,
    merge_metadata,
    public_projection,
)
from pai_agents.lifecycle.ui_data import UiDataRecorder


class Ok(BaseModel):
    note: str | None = None


class Required(BaseModel):
    needed: str


class StrToInt(BaseModel):
    value: str = "1"

    @field_validator("value", mode="after")
    @classmethod
    def to_int(cls, v: str) -> int:  # type: ignore[override]
        return int(v)


class Lowered(BaseModel):
    tag: str = "x"

    @field_validator("tag")
    @classmethod
    def lower(cls, v: str) -> str:
        return v.lower()


class Stamped(BaseModel):
    ids: list[str] = Field(default_factory=list)


def test_ad_028_a_schema_must_accept_empty() -> None:
    """AD-028: a schema that rejects {} fails at definition time."""
    with pytest.raises(MetadataSchemaError):
        MetadataSchemas(private=Required, public=Ok)


def test_ad_029_ad_030_output_must_be_a_canonical_fixed_point() -> None:
    """AD-029/AD-030: str -> int transforms are rejected; stable canonicalizing coercions pass."""
    with pytest.raises(MetadataSchemaError):
        MetadataSchemas(private=Ok, public=StrToInt)
    pair = MetadataSchemas(private=Ok, public=Lowered)
    assert pair.initial().public == {"tag": "x"}
    assert merge_metadata(Lowered, {"tag": "x"}, {"tag": "ABC"}, what="m") == {"tag": "abc"}


def test_ad_031_ad_032_initial_bags_are_parsed_anew_each_time() -> None:
    """AD-031/AD-032: the parsed {} (defaults included) is fresh for every run."""
    pair = MetadataSchemas(private=Stamped, public=Ok)
    first, second = pair.initial(), pair.initial()
    assert first.private == {"ids": []}
    assert first.private["ids"] is not second.private["ids"]


def test_lc_024_lc_025_merge_is_shallow_and_whole_object_validated() -> None:
    """LC-024/LC-025: nested values are replaced whole; the merged object is validated."""

    class Bag(BaseModel):
        a: dict[str, int] = {}
        b: int = 0

    assert merge_metadata(Bag, {"a": {"x": 1}, "b": 2}, {"a": {"y": 2}}, what="m") == {
        "a": {"y": 2},
        "b": 2,
    }
    with pytest.raises(InvalidMetadata):
        merge_metadata(Bag, {"a": {}, "b": 2}, {"b": "nope"}, what="m")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {1: "x"}, date(2024, 1, 1), (1, 2)])
def test_lc_026_values_must_be_strict_json(value: object) -> None:
    """LC-026: NaN, infinities, non-string keys and non-JSON objects are refused."""

    class Free(BaseModel, extra="allow"):
        pass

    with pytest.raises(InvalidMetadata):
        merge_metadata(Free, {}, {"k": value}, what="m")


def test_lc_029_the_public_projection_never_includes_private_values() -> None:
    """LC-029/LC-030: the client projection is the public bag only, and a copy."""
    bags = MetadataBags(private={"secret": "s3cr3t"}, public={"rating": "up"})
    projection = public_projection(bags)
    assert projection == {"rating": "up"}
    projection["rating"] = "down"
    assert bags.public == {"rating": "up"}


class Progress(BaseModel):
    percent: int


def test_lc_112_ui_data_accepts_only_registered_application_data_chunks() -> None:
    """LC-112, AD-040: metadata, tool, reserved and unregistered chunks are refused (the
    ui_data_schemas registry is closed)."""
    writer = UiDataRecorder({"progress": Progress})
    for chunk in (
        {"type": "message-metadata", "messageMetadata": {}},
        {"type": "tool-input-available", "toolCallId": "c", "toolName": "x", "input": {}},
        {"type": "data-pai-run", "data": {}},
        {"type": "data-other", "data": {}},
        {"type": "data-progress", "data": {"percent": 1}, "extra": 1},
    ):
        with pytest.raises(InvalidUiData):
            writer.write(chunk)
    assert writer.chunks == []


def test_lc_113_ui_data_forwards_the_parsed_canonical_value() -> None:
    """LC-113, AD-040: the payload is parsed; the parsed strict-JSON fixed point is forwarded."""
    writer = UiDataRecorder({"progress": Progress, "label": TypeAdapter(str)})
    chunk = writer.write({"type": "data-progress", "id": "p1", "data": {"percent": "42"}})
    assert chunk == {"type": "data-progress", "id": "p1", "data": {"percent": 42}}
    with pytest.raises(InvalidUiData):
        writer.write({"type": "data-progress", "data": {"percent": "many"}})
    with pytest.raises(InvalidUiData):
        writer.write({"type": "data-label", "data": float("nan")})
    assert writer.chunks == [chunk]


def test_lc_114_transient_chunks_are_validated_like_retained_ones() -> None:
    """LC-114: transient data is validated exactly the same way."""
    writer = UiDataRecorder({"progress": Progress})
    with pytest.raises(InvalidUiData):
        writer.write({"type": "data-progress", "data": {}, "transient": True})
    assert (
        writer.write({"type": "data-progress", "data": {"percent": 5}, "transient": True})[
            "transient"
        ]
        is True
    )


def test_lc_113_a_non_fixed_point_payload_is_refused() -> None:
    """LC-113, AD-040: a schema whose output changes on reparse is refused at write time."""

    class Drift(BaseModel):
        n: int = 0

        @field_validator("n")
        @classmethod
        def bump(cls, v: int) -> int:
            return v + 1

    with pytest.raises(InvalidMetadata):
        canonical_value(Drift, {"n": 1})
