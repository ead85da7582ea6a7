"""What every agent builder receives, and the errors a definition raises.

The inputs of instruction, model and runtime-context builders (:class:`AgentBehaviorInput`)
and the instructions values they return, shared by the agent definition and its side
models (titles, reasoning summaries) without those importing the definition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pai_agents.abort import AbortSignal
from pai_agents.models.base import ModelMessage

__all__ = [
    "AgentBehaviorInput",
    "AgentDefinitionError",
    "InstructionsValue",
    "InvalidAgentInput",
    "instructions_split",
    "instructions_value",
]

# A string, one system message, or an ordered list of system messages (AD-024); message-local
# ``providerOptions`` stay on their message (AD-025).
InstructionsValue: TypeAlias = "str | ModelMessage | list[ModelMessage]"


class AgentDefinitionError(ValueError):
    """An agent definition is malformed; raised at definition time, never in a run."""


class InvalidAgentInput(ValueError):
    """Identity or client data did not match the agent's schema."""


@dataclass(frozen=True, kw_only=True)
class AgentBehaviorInput:
    """What instruction, model and runtime-context builders receive.

    ``signal`` is the run's abort signal: it fires when the run is cancelled or stopped
    (AD-013, AD-016).
    """

    identity: Mapping[str, Any]
    client_data: Mapping[str, Any]
    runtime_context: Any
    thread_id: str
    run_id: str
    signal: AbortSignal = field(default_factory=AbortSignal)


def instructions_value(value: Any, *, agent: str) -> InstructionsValue | None:
    """Check and normalize an instructions value (AD-024): None, a string, one system
    message (a mapping) or a sequence of system messages; anything else becomes ``str()``."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return _system_message(value, agent)
    if isinstance(value, Sequence):
        return [_system_message(item, agent) for item in value]
    return str(value)


def instructions_split(
    value: InstructionsValue | None,
) -> tuple[str | None, list[ModelMessage]]:
    """``(system, leading messages)`` for a provider request: a string is the system
    prompt; structured instructions become leading system messages, in order (AD-024)."""
    if value is None or isinstance(value, str):
        return value, []
    if isinstance(value, Mapping):
        return None, [dict(value)]
    return None, [dict(m) for m in value]


def _system_message(item: Any, agent: str) -> ModelMessage:
    if not isinstance(item, Mapping) or item.get("role") != "system":
        raise AgentDefinitionError(
            f"agent {agent!r}: structured instructions are system messages "
            f"({{'role': 'system', 'content': ...}}), not {item!r}"
        )
    return dict(item)
