"""``define_agent``: build and check the server-side definition of an agent."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from pai_agents.agent import (
    AgentDefinition,
    Instructions,
    ModelSource,
    RuntimeContextBuilder,
    SendPolicy,
    ToolConfig,
)
from pai_agents.behavior import AgentDefinitionError
from pai_agents.capabilities import fold_capabilities
from pai_agents.commands import Command, command_map
from pai_agents.definition_checks import (
    check_basics,
    check_instructions,
    check_limits,
    check_metadata_schemas,
    check_model,
    check_schemas,
    check_ui_data_schemas,
    composed_lifecycle,
    default_version,
    mcp_server_tuple,
    provider_tool_map,
    tool_maps,
)
from pai_agents.lifecycle.metadata import MetadataSchemas
from pai_agents.mcp.config import MCPServer
from pai_agents.models.base import ProviderTool
from pai_agents.reasoning_summary import ReasoningSummary, reasoning_summary_option
from pai_agents.titles import ThreadTitles, thread_titles_option
from pai_agents.tools import Tool

__all__ = ["define_agent"]


def define_agent(
    name: str,
    *,
    instructions: Instructions,
    model: ModelSource,
    version: str | None = None,
    description: str = "",
    tools: Iterable[Tool | ToolConfig] | Mapping[str, Tool | ToolConfig] = (),
    max_steps: int = 10,
    runtime_context: RuntimeContextBuilder | None = None,
    identity: type[BaseModel] | None = None,
    client_data: type[BaseModel] | None = None,
    send_policy: SendPolicy = "queue",
    lifecycle: Any = None,
    on_runtime_error: Callable[..., Any] | None = None,
    ui_data_schemas: Mapping[str, Any] | None = None,
    stop_when: Sequence[Callable[..., Any]] = (),
    run_metadata: MetadataSchemas | None = None,
    thread_metadata: MetadataSchemas | None = None,
    message_metadata: MetadataSchemas | None = None,
    provider_tools: Mapping[str, ProviderTool | Mapping[str, Any]] | None = None,
    thread_titles: bool | ThreadTitles | None = None,
    reasoning_summary: bool | ReasoningSummary | None = None,
    max_retries: int | None = None,
    max_tool_calls_per_step: int | None = None,
    commands: Iterable[Command] | Mapping[str, Command] = (),
    mcp_servers: Sequence[MCPServer] = (),
) -> AgentDefinition:
    """Define an agent.

    ``instructions`` is a string, one system message (``{"role": "system", "content": ...}``,
    optionally with ``providerOptions``), an ordered list of system messages, or a builder
    (sync or async) returning one of those, called for each model step; ``version`` defaults
    to a fingerprint of the declared surface; ``model`` is a
    :class:`LanguageModel`, a :class:`ModelSelection`, or a resolver (sync or async) that
    returns either, called once per run. ``identity`` and ``client_data`` are pydantic
    models validating the trusted caller and the untrusted client data.

    ``lifecycle`` is an :class:`~pai_agents.lifecycle.AgentLifecycle`, a mapping of hook
    callables, or a sequence of either (composed left to right with
    :func:`~pai_agents.lifecycle.compose_lifecycle`). ``on_runtime_error`` receives a
    :class:`~pai_agents.engine.runtime_errors.RuntimeErrorReport` for every run that fails on an
    exception; ``ui_data_schemas`` registers the ``data-*`` parts hooks may write.
    ``stop_when`` conditions (``has_tool_call``, ``step_count_is`` or any callable taking the
    after_step input) end the run after a step as soon as one holds; ``max_steps`` applies too.
    ``run_metadata``, ``thread_metadata`` and ``message_metadata`` are
    :class:`~pai_agents.lifecycle.MetadataSchemas` pairs (pydantic models), checked here:
    each must accept ``{}`` and be canonical strict JSON (AD-027..AD-030).

    ``provider_tools`` maps names to provider-defined tools (AD-071): a
    :class:`~pai_agents.models.ProviderTool`, or just its provider-native JSON definition
    (``{"web_search": {"type": "web_search"}}``). They are sent to the provider with every
    model step and run there; PAI validates the calls the provider reports (LC-127) and never
    executes them. Names must not clash with registered tools.

    ``thread_titles`` turns on automatic thread titles after completed runs (AD-007): True
    for the default one-shot generator, or a :class:`~pai_agents.titles.ThreadTitles`.

    ``reasoning_summary`` labels each reasoning part once it closes, without holding back the
    model stream (AD-007, AD-050): True for the default summarizer, or a
    :class:`~pai_agents.reasoning_summary.ReasoningSummary`. The label shows as ``summary``
    on the reasoning part.

    ``max_retries`` bounds the retries of a model step after a transient provider fault
    (``ModelError.retryable``: connection errors, 429, 5xx), with exponential backoff;
    ``max_tool_calls_per_step`` bounds the tool calls executed per step. None takes the
    engine's defaults (``PAI["MODEL_MAX_RETRIES"]``, ``PAI["MAX_TOOL_CALLS_PER_STEP"]``).

    ``commands`` registers :func:`~pai_agents.commands.command` operations clients or server
    code call on a thread (docs/commands.md): names unique and distinct from the tools',
    metadata-aware ones bound to this very ``run_metadata`` object (AD-036). Their
    capabilities are folded with the tools' into ``definition.capabilities`` (AD-062).

    ``mcp_servers`` lists :class:`~pai_agents.mcp.MCPServer` values (stdio or streamable
    HTTP) whose tools join every run episode, listed when it starts (docs/mcp.md).
    """
    check_basics(name, send_policy, max_steps, version)
    check_limits(name, max_retries=max_retries, max_tool_calls_per_step=max_tool_calls_per_step)
    check_schemas(name, identity=identity, client_data=client_data)
    check_ui_data_schemas(name, ui_data_schemas)
    check_instructions(name, instructions)
    tool_map, configs = tool_maps(name, tools)
    check_model(name, model)
    composed = composed_lifecycle(name, lifecycle, stop_when)
    if on_runtime_error is not None and not callable(on_runtime_error):
        raise AgentDefinitionError(f"agent {name!r}: on_runtime_error must be callable")
    check_metadata_schemas(
        name,
        run_metadata=run_metadata,
        thread_metadata=thread_metadata,
        message_metadata=message_metadata,
    )
    provider_map = provider_tool_map(name, provider_tools, tool_map)
    command_by_name = command_map(name, commands, tools=tool_map, run_metadata=run_metadata)
    servers = mcp_server_tuple(name, mcp_servers)
    operations = [
        *((key, tool.capabilities) for key, tool in tool_map.items()),
        *((f"command {key}", item.capabilities) for key, item in command_by_name.items()),
    ]
    return AgentDefinition(
        name=name,
        version=version
        or default_version(
            name, tool_map, max_steps, provider_map, command_by_name, mcp_servers=servers
        ),
        description=description,
        instructions=instructions,
        model=model,
        tools=tool_map,
        max_steps=max_steps,
        runtime_context=runtime_context,
        identity_schema=identity,
        client_data_schema=client_data,
        send_policy=send_policy,
        tool_configs=configs,
        lifecycle=composed,
        on_runtime_error=on_runtime_error,
        ui_data_schemas=dict(ui_data_schemas or {}),
        run_metadata=run_metadata,
        thread_metadata=thread_metadata,
        message_metadata=message_metadata,
        provider_tools=provider_map,
        thread_titles=thread_titles_option(name, thread_titles),
        reasoning_summary=reasoning_summary_option(name, reasoning_summary),
        max_retries=max_retries,
        max_tool_calls_per_step=max_tool_calls_per_step,
        commands=command_by_name,
        capabilities=fold_capabilities(name, operations),
        mcp_servers=servers,
    )
