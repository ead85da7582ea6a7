"""Capability bindings from ``PAI["CAPABILITIES"]`` and their start-up check (AD-063).

``PAI["CAPABILITIES"]`` maps capability ids to a dotted path (or the object itself): an
implementation, or a :func:`~pai_agents.capabilities.capability_factory`. Every id a
registered agent needs must be bound: ``manage.py check`` reports each gap before a run
meets it (docs/capabilities.md).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.utils.module_loading import import_string

from pai_agents.capabilities import binding_problems
from pai_threads.conf import pai_settings
from pai_threads.execution import registry

__all__ = ["BindingImportError", "capability_bindings", "check_capabilities"]

_HINT = (
    'PAI["CAPABILITIES"] = {"<id>": "myapp.module.implementation"}: a dotted path to an '
    "object implementing the capability's interface, or to a capability_factory"
)


class BindingImportError(ImportError):
    """A ``PAI["CAPABILITIES"]`` dotted path that does not import."""


def capability_bindings() -> dict[str, Any]:
    """The configured bindings by id, dotted paths imported (module imports are cached)."""
    configured = pai_settings.CAPABILITIES or {}
    bindings: dict[str, Any] = {}
    for key, value in configured.items():
        if not isinstance(value, str):
            bindings[key] = value
            continue
        try:
            bindings[key] = import_string(value)
        except Exception as exc:
            raise BindingImportError(
                f"PAI['CAPABILITIES'][{key!r}] = {value!r} could not be imported: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    return bindings


@register("pai")
def check_capabilities(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every capability of every registered agent is bound to a fitting object."""
    if not isinstance(getattr(settings, "PAI", {}), dict):
        return []  # reported once as pai.E015
    configured = pai_settings.CAPABILITIES
    if not isinstance(configured, dict):
        return [
            Error(f"PAI['CAPABILITIES'] = {configured!r} must be a dict", hint=_HINT, id="pai.E021")
        ]
    try:
        agents = registry.agents()
    except Exception:
        return []  # reported by check_agents (pai.E001 / pai.E005)
    try:
        bindings = capability_bindings()
    except BindingImportError as exc:
        return [Error(str(exc), hint=_HINT, id="pai.E021")]
    messages: list[CheckMessage] = []
    for agent in agents.values():
        for capability_id, problem in binding_problems(agent.capabilities, bindings).items():
            missing = problem == "no binding"
            text = f"agent {agent.name!r} needs capability {capability_id!r}: " + (
                "it is not bound" if missing else problem
            )
            messages.append(Error(text, hint=_HINT, id="pai.E020" if missing else "pai.E022"))
    return messages
