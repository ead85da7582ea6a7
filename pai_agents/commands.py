"""Commands: named, typed server operations a client (or server code) calls on a thread.

A tool is called by the model; a command by a person's client or by trusted server code:
"export this thread", "mark resolved", "retry with the larger model". Like a tool, a
command has a pydantic input model validating what the caller sends, an optional output
model, and an ``execute`` callable; unlike a tool it is **server-only** unless its author
exposes it (``exposed=True``), and it either returns a value or starts a run
(``starts_run=True``, ``execute`` returns a :class:`CommandRun`). docs/commands.md is the
guide; the Django runtime that calls commands is ``pai_threads.services.commands``.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from pydantic import BaseModel, ValidationError

from pai_agents._callables import call_user
from pai_agents.behavior import AgentDefinitionError
from pai_agents.capabilities import Capability, check_declarations
from pai_agents.json import JsonValue, NotStrictJson, ensure_strict_json
from pai_agents.lifecycle.metadata import MetadataSchemaError, MetadataSchemas
from pai_agents.tools import Tool

__all__ = [
    "Command",
    "CommandContext",
    "CommandError",
    "CommandInputError",
    "CommandRun",
    "command",
    "command_map",
    "define_command",
]

Execute = Callable[..., Any]


class CommandError(Exception):
    """Raise from ``execute`` to refuse the command with a message the caller sees verbatim
    (``command_failed``); any other exception is a server fault whose detail stays in the
    server's log."""


class CommandInputError(ValueError):
    """The caller's input does not match the command's input model.

    ``errors`` lists each problem as ``{"loc": [...], "msg": ...}`` (pydantic's, trimmed)."""

    def __init__(self, message: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.errors = errors


@dataclass(frozen=True, kw_only=True)
class CommandRun:
    """What a ``starts_run=True`` command's ``execute`` returns: the run to start.

    ``message``: the run's user message (a text, or a UIMessage ``{"role": "user",
    "parts": [...]}``), stored and queued by the thread's send policy exactly like a send
    (``policy`` overrides it); None starts the run without one, like a trigger, which a
    thread with an active run refuses (``thread_busy``). ``client_data`` replaces the
    caller's client data for the run (validated by the agent's schema)."""

    message: str | Mapping[str, Any] | None = None
    client_data: Mapping[str, Any] | None = None
    policy: Literal["queue", "reject", "interrupt", "steer"] | None = None


@dataclass(frozen=True, kw_only=True)
class CommandContext:
    """What a command knows about the call it serves.

    ``thread`` is the trusted thread facade (messages, metadata, private metadata, context,
    ``mutate`` and ``runs``); its writes reach live clients as hooks' writes do.
    ``capabilities`` maps the command's own aliases to the bound implementations."""

    command_name: str
    thread_id: str
    identity: Mapping[str, Any]
    client_data: Mapping[str, Any]
    runtime_context: Any
    thread: Any
    capabilities: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Command:
    """A command definition. Build it with :func:`command` / :func:`define_command`."""

    name: str
    description: str
    input_model: type[BaseModel]
    execute: Execute
    output_model: type[BaseModel] | None = None
    # Callable by ordinary clients (HTTP, websocket) and listed in the manifest; otherwise
    # only trusted server code can call it, and transports answer "not found".
    exposed: bool = False
    starts_run: bool = False
    # The agent's run metadata schema pair, the very object (AD-036), for commands written
    # against it; define_agent refuses any other object.
    run_metadata: MetadataSchemas | None = field(default=None, hash=False)
    capabilities: Mapping[str, Capability] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "a").replace("-", "a").isalnum():
            raise AgentDefinitionError(
                f"command name {self.name!r} must be letters, digits, '_' or '-'"
            )
        for what, model in (("input", self.input_model), ("output", self.output_model)):
            if model is None and what == "output":
                continue
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                raise AgentDefinitionError(
                    f"command {self.name!r}: {what} must be a pydantic model class"
                )
        if not callable(self.execute):
            raise AgentDefinitionError(f"command {self.name!r}: execute must be callable")
        if self.output_model is not None and self.starts_run:
            raise AgentDefinitionError(
                f"command {self.name!r}: a starts_run command returns a CommandRun, not output"
            )
        if self.run_metadata is not None:
            check_pair(f"command {self.name!r}", self.run_metadata)
        declared = check_declarations(f"command {self.name!r}", self.capabilities)
        object.__setattr__(self, "capabilities", declared)

    def manifest(self) -> dict[str, Any]:
        """Discovery metadata for clients: no schema, no callable (AD-075, AD-076)."""
        return {"name": self.name, "description": self.description, "startsRun": self.starts_run}

    def parse_input(self, raw: Any) -> BaseModel:
        """The caller's input validated by the input model, or :class:`CommandInputError`."""
        try:
            return self.input_model.model_validate({} if raw is None else raw)
        except ValidationError as exc:
            errors = [
                {"loc": [str(p) for p in e["loc"]], "msg": e["msg"]}
                for e in exc.errors(include_url=False)
            ]
            details = "; ".join(f"{'.'.join(e['loc']) or '(input)'}: {e['msg']}" for e in errors)
            raise CommandInputError(
                f"invalid input for command {self.name}: {details}", errors
            ) from None

    async def arun(self, parsed: BaseModel, context: CommandContext) -> JsonValue | CommandRun:
        """Execute; sync callables run in a worker thread. The output is validated and
        serialized (a ``starts_run`` command's :class:`CommandRun` is returned as is)."""
        result = await call_user(self.execute, parsed, context)
        if self.starts_run:
            if result is None:
                return CommandRun()
            if not isinstance(result, CommandRun):
                raise TypeError(
                    f"command {self.name!r} starts a run: execute must return a CommandRun, "
                    f"not {type(result).__name__}"
                )
            return result
        if self.output_model is not None and not isinstance(result, BaseModel):
            result = self.output_model.model_validate(result)
        if isinstance(result, BaseModel):
            result = result.model_dump(mode="json")
        try:
            return ensure_strict_json(result, what=f"output of command {self.name}")
        except NotStrictJson as exc:
            raise TypeError(str(exc)) from exc


def check_pair(owner: str, pair: Any) -> None:
    """A metadata schema pair, checked where it is registered (AD-028..AD-030, AD-036)."""
    if not isinstance(pair, MetadataSchemas):
        raise AgentDefinitionError(f"{owner}: run_metadata must be MetadataSchemas(...)")
    try:
        pair.initial()
    except MetadataSchemaError as exc:
        raise AgentDefinitionError(f"{owner}: run_metadata: {exc}") from exc


def define_command(
    name: str,
    *,
    input: type[BaseModel],
    execute: Execute,
    description: str = "",
    output: type[BaseModel] | None = None,
    exposed: bool = False,
    starts_run: bool = False,
    run_metadata: MetadataSchemas | None = None,
    capabilities: Mapping[str, Capability] | None = None,
) -> Command:
    """Define a command explicitly; :func:`command` is the decorator form.

    ``execute(args, ctx)`` (``def`` or ``async def``) takes the validated input model and a
    :class:`CommandContext`. ``exposed=True`` makes it callable by ordinary clients (the
    default is server-only); ``starts_run=True`` makes ``execute`` return a
    :class:`CommandRun`. ``run_metadata`` must be the very pair given to
    ``define_agent(run_metadata=)`` (AD-036); ``capabilities`` as for tools."""
    return Command(
        name=name,
        description=description,
        input_model=input,
        output_model=output,
        execute=execute,
        exposed=exposed,
        starts_run=starts_run,
        run_metadata=run_metadata,
        capabilities=dict(capabilities or {}),
    )


@overload
def command(fn: Execute, /) -> Command: ...


@overload
def command(
    *,
    name: str | None = None,
    input: type[BaseModel] | None = None,
    output: type[BaseModel] | None = None,
    description: str = "",
    exposed: bool = False,
    starts_run: bool = False,
    run_metadata: MetadataSchemas | None = None,
    capabilities: Mapping[str, Capability] | None = None,
) -> Callable[[Execute], Command]: ...


def command(
    fn: Execute | None = None,
    /,
    *,
    name: str | None = None,
    input: type[BaseModel] | None = None,
    output: type[BaseModel] | None = None,
    description: str = "",
    exposed: bool = False,
    starts_run: bool = False,
    run_metadata: MetadataSchemas | None = None,
    capabilities: Mapping[str, Capability] | None = None,
) -> Command | Callable[[Execute], Command]:
    """Decorate ``execute`` as a command: its name and docstring become the command's name
    and description, its first parameter's annotation the input model and its return
    annotation (a pydantic model) the output model, unless given::

        @command(exposed=True)
        async def export_transcript(args: ExportInput, ctx: CommandContext) -> Export:
            '''Export the thread as text.'''
    """

    def decorator(execute: Execute) -> Command:
        hints = _hints(execute)
        params = list(inspect.signature(execute).parameters)
        model = input or (hints.get(params[0]) if params else None)
        if model is None:
            raise AgentDefinitionError(
                f"command {execute.__name__!r}: annotate its first parameter with a "
                "pydantic model, or pass input="
            )
        returned = hints.get("return")
        if output is None and isinstance(returned, type) and issubclass(returned, BaseModel):
            returned_model: type[BaseModel] | None = returned
        else:
            returned_model = output
        return define_command(
            name or execute.__name__,
            input=model,
            output=None if starts_run else returned_model,
            execute=execute,
            description=description or inspect.cleandoc(execute.__doc__ or ""),
            exposed=exposed,
            starts_run=starts_run,
            run_metadata=run_metadata,
            capabilities=capabilities,
        )

    return decorator if fn is None else decorator(fn)


def _hints(fn: Execute) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception as exc:  # an annotation that does not resolve (a forward reference)
        raise AgentDefinitionError(
            f"command {getattr(fn, '__name__', fn)!r}: its annotations do not resolve ({exc}); "
            "pass input= (and output=) explicitly"
        ) from exc


def command_map(
    agent: str,
    commands: Iterable[Command] | Mapping[str, Command],
    *,
    tools: Mapping[str, Tool],
    run_metadata: MetadataSchemas | None,
) -> dict[str, Command]:
    """``define_agent(commands=)`` checked: unique names that no tool uses, and every
    metadata-aware command bound to the agent's own run metadata pair (AD-036)."""
    items = commands.items() if isinstance(commands, Mapping) else ((c.name, c) for c in commands)
    checked: dict[str, Command] = {}
    for key, item in items:
        if not isinstance(item, Command):
            raise AgentDefinitionError(
                f"agent {agent!r}: {key!r} is not a Command (use define_command or @command)"
            )
        if key != item.name:
            raise AgentDefinitionError(
                f"agent {agent!r}: command key {key!r} != its name {item.name!r}"
            )
        if key in checked:
            raise AgentDefinitionError(f"agent {agent!r}: duplicate command {key!r}")
        if key in tools:
            raise AgentDefinitionError(f"agent {agent!r}: command {key!r} clashes with a tool")
        if item.run_metadata is not None and item.run_metadata is not run_metadata:
            # Identity, not equality: an equal copy is a second declaration that can drift.
            raise AgentDefinitionError(
                f"agent {agent!r}: command {key!r} is bound to a different run_metadata "
                "object than the agent's; pass the same MetadataSchemas object to both "
                "(AD-036)"
            )
        checked[key] = item
    return checked
