"""A metadata schema whose defaults come from factories, for AD-032's tests.

Each parse of ``{}`` draws a new ``key``; a parse made once and copied repeats it.
"""

from __future__ import annotations

import itertools

from pydantic import BaseModel, Field

__all__ = ["Empty", "Keyed"]

_keys = itertools.count()


class Keyed(BaseModel):
    """A per-parse key and a list to fill: both default factories."""

    key: str = Field(default_factory=lambda: f"key-{next(_keys)}")
    seen: list[str] = Field(default_factory=list)


class Empty(BaseModel):
    """No fields: the other half of the pair."""
