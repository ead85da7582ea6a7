"""Capabilities: dependencies a tool declares and the project binds (AD-062, AD-063).

A tool says *what* it needs (``capability("tickets", TicketDesk)``, under a local alias);
the runtime is given *which implementation* serves each capability id. The agent's
requirement map is folded from its tools by id, so one id declared through two different
objects is caught when the agent is defined, and a missing binding when the runtime is
created, never by the first call that needs it. docs/capabilities.md is the guide.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pai_agents._callables import call_user
from pai_agents.behavior import AgentDefinitionError

__all__ = [
    "Capability",
    "CapabilityBindingError",
    "CapabilityFactory",
    "binding_problems",
    "capability",
    "capability_factory",
    "check_declarations",
    "fold_capabilities",
    "operation_capabilities",
    "resolve_bindings",
]

_ID: Final = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,127}")
_ALIAS: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class CapabilityBindingError(AgentDefinitionError):
    """A capability declared inconsistently, left unbound, or bound to the wrong kind of
    object (AD-062, AD-063)."""


@dataclass(frozen=True, eq=False)
class Capability:
    """An id plus the interface its implementation must satisfy.

    Compared by identity (``eq=False``): two objects with the same id are two declarations,
    which :func:`fold_capabilities` refuses (AD-062)."""

    id: str
    interface: type
    description: str = ""

    def accepts(self, implementation: object) -> bool:
        return isinstance(implementation, self.interface)

    def __repr__(self) -> str:
        return f"capability({self.id!r}, {getattr(self.interface, '__name__', self.interface)})"


def capability(id: str, interface: type = object, *, description: str = "") -> Capability:
    """Declare a capability once, at module level, and import it where it is needed.

    ``interface`` is a class or a ``typing.runtime_checkable`` Protocol: bindings are
    checked with ``isinstance`` (a plain Protocol cannot be, so it is refused here)."""
    if not isinstance(id, str) or not _ID.fullmatch(id):
        raise CapabilityBindingError(
            f"a capability id is a letter then letters, digits, '.', '_' or '-', not {id!r}"
        )
    if not isinstance(interface, type):
        raise CapabilityBindingError(f"capability {id!r}: the interface must be a class")
    if getattr(interface, "_is_protocol", False) and not getattr(
        interface, "_is_runtime_protocol", False
    ):
        raise CapabilityBindingError(
            f"capability {id!r}: decorate the Protocol {interface.__name__} with "
            "@typing.runtime_checkable so bindings can be checked"
        )
    return Capability(id=id, interface=interface, description=description)


@dataclass(frozen=True)
class CapabilityFactory:
    """A binding built per run episode: ``build(behavior)`` (sync or async) returns the
    implementation, e.g. a client for the caller's tenant. Mark one with
    :func:`capability_factory`."""

    build: Callable[..., Any]


def capability_factory(build: Callable[..., Any]) -> CapabilityFactory:
    """Mark ``build`` as a factory: called once per run episode with the run's
    :class:`~pai_agents.behavior.AgentBehaviorInput` (identity, thread id, runtime context)."""
    if not callable(build):
        raise CapabilityBindingError("capability_factory() takes a callable")
    return CapabilityFactory(build)


def check_declarations(owner: str, declared: object) -> dict[str, Capability]:
    """An operation's ``{alias: Capability}`` map, checked (aliases are identifiers)."""
    if declared is None:
        return {}
    if not isinstance(declared, Mapping):
        raise CapabilityBindingError(f"{owner}: capabilities is a mapping of alias to capability")
    out: dict[str, Capability] = {}
    for alias, item in declared.items():
        if not isinstance(alias, str) or not _ALIAS.fullmatch(alias):
            raise CapabilityBindingError(f"{owner}: capability alias {alias!r} is not a name")
        if not isinstance(item, Capability):
            raise CapabilityBindingError(
                f"{owner}: capability {alias!r} must come from capability(), not {item!r}"
            )
        out[alias] = item
    return out


def fold_capabilities(
    agent: str, operations: Iterable[tuple[str, Mapping[str, Capability]]]
) -> dict[str, Capability]:
    """The agent's requirement map keyed by capability id, aliases remapped (AD-062).

    ``operations`` yields ``(operation name, {alias: capability})``; one id declared
    through two distinct objects raises :class:`CapabilityBindingError`."""
    folded: dict[str, Capability] = {}
    declared_by: dict[str, str] = {}
    for operation, declared in operations:
        for item in declared.values():
            known = folded.get(item.id)
            if known is not None and known is not item:
                raise CapabilityBindingError(
                    f"agent {agent!r}: capability {item.id!r} is declared by "
                    f"{declared_by[item.id]!r} and {operation!r} through different objects; "
                    "declare it once and import that object"
                )
            folded[item.id] = item
            declared_by.setdefault(item.id, operation)
    return dict(sorted(folded.items()))


def binding_problems(
    required: Mapping[str, Capability], bindings: Mapping[str, Any]
) -> dict[str, str]:
    """Why each required id cannot be served by ``bindings``: ``{id: problem}``.

    A factory is accepted here; its result is checked when it is built."""
    problems: dict[str, str] = {}
    for capability_id, item in required.items():
        if capability_id not in bindings:
            problems[capability_id] = "no binding"
            continue
        bound = bindings[capability_id]
        if not isinstance(bound, CapabilityFactory) and not item.accepts(bound):
            problems[capability_id] = (
                f"{type(bound).__name__} does not implement {item.interface.__name__}"
            )
    return problems


async def resolve_bindings(
    required: Mapping[str, Capability], bindings: Mapping[str, Any], behavior: Any
) -> dict[str, Any]:
    """The implementations for one run episode, by id: factories built, results checked."""
    resolved: dict[str, Any] = {}
    for capability_id, item in required.items():
        bound = bindings[capability_id]
        if isinstance(bound, CapabilityFactory):
            bound = await call_user(bound.build, behavior)
            if not item.accepts(bound):
                raise CapabilityBindingError(
                    f"the factory bound to capability {capability_id!r} built a "
                    f"{type(bound).__name__}, not a {item.interface.__name__}"
                )
        resolved[capability_id] = bound
    return resolved


def operation_capabilities(
    declared: Mapping[str, Capability], resolved: Mapping[str, Any]
) -> dict[str, Any]:
    """What one tool sees: its own aliases mapped to the episode's implementations."""
    return {alias: resolved[item.id] for alias, item in declared.items()}
