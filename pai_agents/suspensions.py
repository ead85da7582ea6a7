"""Declared tool suspensions: a tool asks a person for typed data mid-call (docs/suspensions.md).

A tool declares ``suspends={"address": Address}`` (a suspension name and the pydantic model
of the answer) and returns ``ctx.suspend("address", payload=...)`` from ``execute``. The
engine turns that into a durable pending action of kind ``input``; the answer is validated
against the declared model before the call re-enters ``execute``. Approvals and client tools
are the two built-in kinds, whose names are reserved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from pai_agents.json import JsonValue, NotStrictJson, ensure_strict_json

__all__ = [
    "BUILTIN_SUSPENSIONS",
    "Suspend",
    "answer_schema",
    "check_suspends",
    "suspend_value",
]

# The built-in kinds: a person approving a call, a client fulfilling a tool without execute.
# A sub-agent call waits as the third: answered by the runtime (docs/subagents.md).
BUILTIN_SUSPENSIONS = frozenset({"approval", "client", "subagent"})


@dataclass(frozen=True)
class Suspend:
    """What ``ctx.suspend(...)`` returns: ``execute`` ends without a result and the call
    waits for an answer to suspension ``name``. ``payload`` is shown to the person."""

    name: str
    payload: JsonValue = None


def _valid_name(name: object) -> bool:
    return (
        isinstance(name, str) and bool(name) and name.replace("_", "a").replace("-", "a").isalnum()
    )


def check_suspends(
    owner: str, declared: Mapping[str, Any] | None, *, executes: bool
) -> dict[str, type[BaseModel]]:
    """The declaration as a plain dict; ``TypeError``/``ValueError`` when it is wrong, at
    definition time rather than when a person answers."""
    if not declared:
        return {}
    if not isinstance(declared, Mapping):
        raise TypeError(f"{owner}: suspends must map suspension names to pydantic models")
    if not executes:
        raise ValueError(f"{owner}: a tool without execute cannot declare suspensions")
    checked: dict[str, type[BaseModel]] = {}
    for name, model in declared.items():
        if not _valid_name(name):
            raise ValueError(
                f"{owner}: suspension name {name!r} must be letters, digits, '_' or '-'"
            )
        if name in BUILTIN_SUSPENSIONS:
            raise ValueError(f"{owner}: suspension name {name!r} is reserved (built-in kind)")
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"{owner}: the answer of suspension {name!r} must be a pydantic model")
        checked[name] = model
    return checked


def suspend_value(
    tool_name: str, declared: Mapping[str, type[BaseModel]], name: str, payload: Any
) -> Suspend:
    """The checked ``Suspend`` for ``ctx.suspend``: a declared name, a strict JSON payload."""
    if name not in declared:
        known = ", ".join(sorted(declared)) or "none"
        raise ValueError(f"tool {tool_name} suspended as {name!r}; declared: {known}")
    try:
        value = ensure_strict_json(payload, what=f"payload of suspension {name!r}")
    except NotStrictJson as exc:
        raise ValueError(str(exc)) from exc
    return Suspend(name=name, payload=value)


def answer_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema a client renders the answer form from (stored on the action)."""
    return model.model_json_schema()
