"""``define_agent``: the server-side definition of an agent.

A definition is a frozen value: it creates no storage, routes or workers. The Django layer
registers definitions by dotted path (``PAI["AGENTS"]``) and runs them through the engine.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ValidationError

from pai_agents._callables import call_user
from pai_agents.models.base import LanguageModel, ModelSelection
from pai_agents.tools import Tool

__all__ = [
    "AgentBehaviorInput",
    "AgentDefinition",
    "AgentDefinitionError",
    "InvalidAgentInput",
    "define_agent",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class AgentDefinitionError(ValueError):
    """An agent definition is malformed; raised at definition time, never in a run."""


class InvalidAgentInput(ValueError):
    """Identity or client data did not match the agent's schema."""


@dataclass(frozen=True, kw_only=True)
class AgentBehaviorInput:
    """What instruction, model and runtime-context builders receive."""

    identity: Mapping[str, Any]
    client_data: Mapping[str, Any]
    runtime_context: Any
    thread_id: str
    run_id: str


SendPolicy: TypeAlias = Literal["queue", "reject", "interrupt", "steer"]
Instructions: TypeAlias = "str | Callable[[AgentBehaviorInput], Any]"
ModelSource: TypeAlias = "LanguageModel | ModelSelection | Callable[[AgentBehaviorInput], Any]"
RuntimeContextBuilder: TypeAlias = "Callable[[AgentBehaviorInput], Any]"


@dataclass(frozen=True, kw_only=True)
class AgentDefinition:
    """A registered agent. Build it with :func:`define_agent`."""

    name: str
    version: str | None
    instructions: Instructions
    model: ModelSource
    tools: Mapping[str, Tool]
    max_steps: int = 10
    runtime_context: RuntimeContextBuilder | None = None
    identity_schema: type[BaseModel] | None = None
    client_data_schema: type[BaseModel] | None = None
    description: str = ""
    # What a send does while a run is active: queue it (default), reject it (409), interrupt
    # the active run, or steer it (join its next model step). Overridable per send.
    send_policy: SendPolicy = "queue"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def manifest(self) -> dict[str, Any]:
        """A JSON-serializable description: name, version and the tools the model may see."""
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "maxSteps": self.max_steps,
            "tools": [t.manifest() for t in self.tools.values()],
        }

    def validate_identity(self, identity: Mapping[str, Any]) -> dict[str, Any]:
        return _validate(self.identity_schema, identity, "identity")

    def validate_client_data(self, client_data: Mapping[str, Any] | None) -> dict[str, Any]:
        return _validate(self.client_data_schema, client_data or {}, "client_data")

    async def resolve_instructions(self, behavior: AgentBehaviorInput) -> str | None:
        if callable(self.instructions):
            value = await call_user(self.instructions, behavior)
            return None if value is None else str(value)
        return self.instructions

    async def resolve_model(self, behavior: AgentBehaviorInput) -> ModelSelection:
        source = self.model
        if not isinstance(source, ModelSelection | LanguageModel) and callable(source):
            source = await call_user(source, behavior)
        if isinstance(source, ModelSelection):
            return source
        if isinstance(source, LanguageModel):
            return ModelSelection(model=source)
        raise AgentDefinitionError(
            f"agent {self.name!r}: model resolver returned {type(source).__name__}, "
            "expected a LanguageModel or ModelSelection"
        )

    async def build_runtime_context(self, behavior: AgentBehaviorInput) -> Any:
        if self.runtime_context is None:
            return None
        return await call_user(self.runtime_context, behavior)


def _validate(
    schema: type[BaseModel] | None, value: Mapping[str, Any], what: str
) -> dict[str, Any]:
    if schema is None:
        return dict(value)
    try:
        return schema.model_validate(dict(value)).model_dump(mode="json")
    except ValidationError as exc:
        raise InvalidAgentInput(f"{what} does not match the agent's schema: {exc}") from exc


def define_agent(
    name: str,
    *,
    instructions: Instructions,
    model: ModelSource,
    version: str | None = None,
    description: str = "",
    tools: Iterable[Tool] | Mapping[str, Tool] = (),
    max_steps: int = 10,
    runtime_context: RuntimeContextBuilder | None = None,
    identity: type[BaseModel] | None = None,
    client_data: type[BaseModel] | None = None,
    send_policy: SendPolicy = "queue",
) -> AgentDefinition:
    """Define an agent.

    ``instructions`` is a string or a builder called for each model step; ``model`` is a
    :class:`LanguageModel`, a :class:`ModelSelection`, or a resolver (sync or async) that
    returns either, called once per run. ``identity`` and ``client_data`` are pydantic
    models validating the trusted caller and the untrusted client data.
    """
    if not _NAME.match(name):
        raise AgentDefinitionError(f"agent name {name!r} must match {_NAME.pattern}")
    if send_policy not in ("queue", "reject", "interrupt", "steer"):
        raise AgentDefinitionError(f"agent {name!r}: unknown send_policy {send_policy!r}")
    if max_steps < 1:
        raise AgentDefinitionError(f"agent {name!r}: max_steps must be at least 1")
    tool_map: dict[str, Tool] = {}
    items = tools.items() if isinstance(tools, Mapping) else ((t.name, t) for t in tools)
    for key, item in items:
        if not isinstance(item, Tool):
            raise AgentDefinitionError(f"agent {name!r}: {key!r} is not a Tool (use tool())")
        if key != item.name:
            raise AgentDefinitionError(
                f"agent {name!r}: tool key {key!r} != its name {item.name!r}"
            )
        if key in tool_map:
            raise AgentDefinitionError(f"agent {name!r}: duplicate tool {key!r}")
        tool_map[key] = item
    if not (callable(model) or isinstance(model, ModelSelection | LanguageModel)):
        raise AgentDefinitionError(
            f"agent {name!r}: model must be a LanguageModel, ModelSelection or resolver"
        )
    return AgentDefinition(
        name=name,
        version=version,
        description=description,
        instructions=instructions,
        model=model,
        tools=tool_map,
        max_steps=max_steps,
        runtime_context=runtime_context,
        identity_schema=identity,
        client_data_schema=client_data,
        send_policy=send_policy,
    )
