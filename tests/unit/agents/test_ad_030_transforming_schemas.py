"""AD-030: a metadata schema whose output is not valid input is refused at definition time
even when ``{}`` parses (a default the transform never touches); a canonicalizing coercion
that is stable on reparse is accepted."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

import pytest
from pydantic import BaseModel, PlainSerializer, field_validator

from pai_agents.lifecycle import MetadataSchemaError, MetadataSchemas


class Empty(BaseModel):
    pass


class StrToIntOptional(BaseModel):
    # {} parses to {"n": None}, a fixed point; {"n": "5"} dumps 5, which is not a str.
    n: Annotated[str | None, PlainSerializer(lambda v: v and int(v), return_type=int | None)] = None


class Inner(BaseModel):
    code: Annotated[str, PlainSerializer(lambda v: int(v), return_type=int)] = "0"


class Nested(BaseModel):
    items: list[Inner] = []


class Canonical(BaseModel):
    amount: Decimal = Decimal("0")
    tag: str = ""

    @field_validator("tag")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip().lower()


@pytest.mark.parametrize("schema", [StrToIntOptional, Nested], ids=["field", "nested"])
def test_ad_030_a_transform_outside_the_default_is_refused(schema: type[BaseModel]) -> None:
    """AD-030: passing ``{}`` is not enough: the output type must be an input type."""
    with pytest.raises(MetadataSchemaError, match="AD-030"):
        MetadataSchemas(private=Empty, public=schema)


def test_ad_030_a_stable_canonicalizing_coercion_is_accepted() -> None:
    """AD-030: Decimal dumped as a string, a stripped and lowered string: accepted."""
    pair = MetadataSchemas(private=Empty, public=Canonical)
    assert pair.initial().public == {"amount": "0", "tag": ""}
