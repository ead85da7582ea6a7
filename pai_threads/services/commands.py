"""Calling an agent's commands on a thread: the one runtime behind HTTP, websocket and server.

``invoke_command`` checks everything before ``execute`` runs: the thread in the caller's
scope (another scope's is NotFound), the command on the thread's agent (a server-only
command called by a client is NotFound too: its existence is not disclosed), the input
against the command's model (422 with the errors), identity and client data against the
agent's schemas. Then ``execute`` gets a :class:`~pai_agents.commands.CommandContext` with
the trusted thread facade (:mod:`.command_thread`) and the command's bound capabilities, and
either its output is returned or the :class:`~pai_agents.commands.CommandRun` it returned
starts a run with initiator ``command``, queued by the thread's send policy like a send.

A :class:`~pai_agents.commands.CommandError` raised by ``execute`` is ``command_failed``
(422) with its message; any other exception is logged and answered ``command_failed`` (500)
with a generic message: the caller never sees a traceback or server detail.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async

from pai_agents.agent import AgentDefinition, InvalidAgentInput
from pai_agents.behavior import AgentBehaviorInput
from pai_agents.capabilities import (
    CapabilityBindingError,
    binding_problems,
    operation_capabilities,
    resolve_bindings,
)
from pai_agents.commands import (
    Command,
    CommandContext,
    CommandError,
    CommandInputError,
    CommandRun,
)
from pai_agents.json import JsonValue
from pai_threads.errors import InvalidInput, NotFound, PaiError
from pai_threads.execution import registry
from pai_threads.execution.capabilities import capability_bindings
from pai_threads.identity import Identity
from pai_threads.models import QueueItem, Run, Thread
from pai_threads.services.command_thread import CommandThread
from pai_threads.services.input_guard import check_json
from pai_threads.services.sending import send
from pai_threads.services.threads import get_thread
from pai_threads.services.triggers import trigger

__all__ = [
    "CommandFailed",
    "CommandInputInvalid",
    "CommandResult",
    "ainvoke_command",
    "invoke_command",
]

logger = logging.getLogger("pai.commands")


class CommandInputInvalid(InvalidInput):
    """The input does not match the command's input model; ``details.errors`` lists why."""

    def __init__(self, message: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.details = {"errors": errors}


class CommandFailed(PaiError):
    """``execute`` refused (CommandError: 422, its message) or broke (500, generic)."""

    code = "command_failed"
    status = 422

    def __init__(self, message: str, *, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, kw_only=True)
class CommandResult:
    """A command's answer: its ``output``, or (``starts_run``) the run it started, or the
    queued input and the active run it waits behind, with the stored user message."""

    command: str
    output: JsonValue = None
    run: Run | None = None
    queue_item: QueueItem | None = None
    message_public: dict[str, Any] | None = None
    started_run: bool = False


def invoke_command(
    identity: Identity,
    thread_id: str,
    name: str,
    input: Any = None,
    client_data: Mapping[str, Any] | None = None,
    *,
    exposed_only: bool = False,
) -> CommandResult:
    """Call command ``name`` on ``thread_id`` as ``identity`` (from sync code).

    Trusted server code may call server-only commands; transports pass
    ``exposed_only=True``, under which a server-only command is NotFound."""
    return async_to_sync(ainvoke_command)(
        identity, thread_id, name, input, client_data, exposed_only=exposed_only
    )


async def ainvoke_command(
    identity: Identity,
    thread_id: str,
    name: Any,
    input: Any = None,
    client_data: Mapping[str, Any] | None = None,
    *,
    exposed_only: bool = False,
) -> CommandResult:
    """:func:`invoke_command` for async code (the websocket consumer, async views)."""
    thread, agent, found = await sync_to_async(_resolve)(identity, thread_id, name, exposed_only)
    parsed, trusted_identity, data = _checked(agent, found, identity, input, client_data)
    behavior = AgentBehaviorInput(
        identity=trusted_identity,
        client_data=data,
        runtime_context=None,
        thread_id=thread.id,
        run_id="",  # a command runs outside any run
    )
    try:
        context = await _context(agent, found, thread, behavior)
        result = await found.arun(parsed, context)
    except CommandError as exc:
        raise CommandFailed(str(exc) or f"the command {found.name} failed") from exc
    except PaiError:
        raise  # a typed error from the facade (e.g. NotFound for a run of another thread)
    except Exception as exc:
        logger.exception("command %s on thread %s failed", found.name, thread.id)
        raise CommandFailed(f"the command {found.name} failed", status=500) from exc
    if isinstance(result, CommandRun):
        return await sync_to_async(_start_run)(identity, thread.id, found, result, client_data)
    return CommandResult(command=found.name, output=result)


def _resolve(
    identity: Identity, thread_id: str, name: Any, exposed_only: bool
) -> tuple[Thread, AgentDefinition, Command]:
    thread = get_thread(identity, thread_id)
    try:
        agent = registry.get_agent(thread.agent_name)
    except registry.AgentNotFound:
        raise InvalidInput(f"the thread's agent {thread.agent_name!r} is not available") from None
    if not isinstance(name, str) or not name:
        raise InvalidInput("the command name must be a non-empty string")
    found = agent.commands.get(name)
    if found is None or (exposed_only and not found.exposed):
        raise NotFound("command not found")
    return thread, agent, found


def _checked(
    agent: AgentDefinition,
    found: Command,
    identity: Identity,
    input: Any,
    client_data: Any,
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The parsed input, trusted identity and client data, or a typed 422."""
    if input is not None and not isinstance(input, dict):
        raise InvalidInput("'input' must be a JSON object")
    if client_data is not None and not isinstance(client_data, dict):
        raise InvalidInput("'clientData' must be a JSON object")
    check_json(input, "input")
    try:
        parsed = found.parse_input(input)
    except CommandInputError as exc:
        raise CommandInputInvalid(str(exc), exc.errors) from None
    try:
        trusted_identity = agent.validate_identity(identity.data)
        data = agent.validate_client_data(check_json(client_data, "clientData"))
    except InvalidAgentInput as exc:
        raise InvalidInput(str(exc)) from exc
    return parsed, trusted_identity, data


async def _context(
    agent: AgentDefinition, found: Command, thread: Thread, behavior: AgentBehaviorInput
) -> CommandContext:
    runtime_context = await agent.build_runtime_context(behavior)
    capabilities: dict[str, Any] = {}
    if found.capabilities:
        required = {item.id: item for item in found.capabilities.values()}
        bindings = capability_bindings()
        problems = binding_problems(required, bindings)
        if problems:  # manage.py check reports these (pai.E020..E022)
            raise CapabilityBindingError(f"command {found.name!r}: {problems}")
        resolved = await resolve_bindings(required, bindings, behavior)
        capabilities = operation_capabilities(found.capabilities, resolved)
    return CommandContext(
        command_name=found.name,
        thread_id=thread.id,
        identity=behavior.identity,
        client_data=behavior.client_data,
        runtime_context=runtime_context,
        thread=CommandThread(thread, agent),
        capabilities=capabilities,
    )


def _start_run(
    identity: Identity,
    thread_id: str,
    found: Command,
    spec: CommandRun,
    client_data: Mapping[str, Any] | None,
) -> CommandResult:
    """The run a command asked for: a send of its message (policy applies) or, without
    one, a trigger; both with initiator ``command``."""
    data = spec.client_data if spec.client_data is not None else client_data
    if spec.message is None:
        run = trigger(identity, thread_id, client_data=data, initiator=Run.Initiator.COMMAND)
        return CommandResult(command=found.name, run=run, started_run=True)
    message: Mapping[str, Any] = (
        {"role": "user", "parts": [{"type": "text", "text": spec.message}]}
        if isinstance(spec.message, str)
        else spec.message
    )
    sent = send(
        identity,
        thread_id,
        message,
        client_data=data,
        policy=spec.policy,
        initiator=Run.Initiator.COMMAND,
    )
    return CommandResult(
        command=found.name,
        run=sent.run,
        queue_item=sent.queue_item,
        message_public=sent.message_public,
        started_run=sent.queue_item is None,
    )
