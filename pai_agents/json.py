"""Strict JSON: the only kind of value PAI persists or sends.

Strict means what ``json.dumps(allow_nan=False)`` accepts with string keys only, and what
comes back unchanged from a round trip. Storage and wire boundaries call
:func:`ensure_strict_json` so a NaN or a tuple never reaches the database.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from json import encoder as _json_encoder
from typing import Any, TypeAlias

__all__ = [
    "JsonObject",
    "JsonValue",
    "NotStrictJson",
    "ensure_strict_json",
    "is_strict_json",
    "prebuilt_dumps",
    "strict_loads",
]

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"


class NotStrictJson(ValueError):
    """A value that is not strict JSON (NaN, infinities, non-string keys, non-JSON types)."""


def _check(value: Any, path: str) -> None:
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotStrictJson(f"{path}: {value!r} is not a finite number")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotStrictJson(f"{path}: key {key!r} is not a string")
            _check(item, f"{path}.{key}")
        return
    raise NotStrictJson(f"{path}: {type(value).__name__} is not a JSON type")


def ensure_strict_json(value: Any, *, what: str = "value") -> JsonValue:
    """Return ``value`` unchanged if it is strict JSON, else raise :class:`NotStrictJson`."""
    _check(value, what)
    return value


def is_strict_json(value: Any) -> bool:
    try:
        _check(value, "value")
    except NotStrictJson:
        return False
    return True


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# ``json.loads`` with any keyword builds a new decoder on every call: built once here.
_STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def strict_loads(text: str) -> Any:
    """JSON text as a value; ``NaN`` and the infinities are a ``ValueError`` like any other
    text that is not JSON (a too-deep nesting is Python's ``RecursionError``)."""
    return _STRICT_DECODER.decode(text)


def dumps(value: JsonValue) -> str:
    """Compact strict JSON text."""
    return json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)


def prebuilt_dumps(*, separators: tuple[str, str] = (", ", ": ")) -> Callable[[Any], str]:
    """``json.dumps(value, separators=separators)`` with its other defaults, its C encoder
    made once instead of per call (half the time for a token's event). No circular check:
    events and frames are trees, and a cycle still fails (a RecursionError)."""
    make = getattr(_json_encoder, "c_make_encoder", None)
    if make is None:  # a Python without the C accelerator
        return lambda value: json.dumps(value, separators=separators)
    defaults = json.JSONEncoder()
    item_separator, key_separator = separators
    iterencode = make(
        None,  # markers: no circular check
        defaults.default,
        _json_encoder.encode_basestring_ascii,
        None,  # indent
        key_separator,
        item_separator,
        False,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan
    )
    return lambda value: "".join(iterencode(value, 0))
