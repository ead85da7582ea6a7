"""PAI agents: the framework-free runtime (definitions, tools, models, messages, engine).

Nothing here imports Django's ORM; ``pai_threads`` supplies persistence and transport.
"""

from pai_agents.abort import Aborted, AbortSignal
from pai_agents.agent import AgentBehaviorInput, AgentDefinition, AgentDefinitionError
from pai_agents.capabilities import (
    Capability,
    CapabilityBindingError,
    CapabilityFactory,
    capability,
    capability_factory,
)
from pai_agents.commands import (
    Command,
    CommandContext,
    CommandError,
    CommandRun,
    command,
    define_command,
)
from pai_agents.contract import AgentContract
from pai_agents.define import define_agent
from pai_agents.engine import (
    ClaimedRun,
    EventSink,
    InMemoryThreadStore,
    Lease,
    LeaseLost,
    RecordingSink,
    RunEngine,
    RunOutcome,
    StepRecord,
    ThreadStore,
)
from pai_agents.files import FileProvider, FileRef
from pai_agents.models import (
    LanguageModel,
    ModelRequest,
    ModelSelection,
    ModelSettings,
    ProviderTool,
    Usage,
)
from pai_agents.models.scripted import ScriptedModel, ScriptedStep, ScriptedToolCall
from pai_agents.reasoning_summary import ReasoningSummary, ReasoningSummaryInput
from pai_agents.subagents import SubagentTool, subagent
from pai_agents.sync_calls import SyncRunner, run_sync, use_sync_runner
from pai_agents.titles import ThreadTitleInput, ThreadTitles
from pai_agents.tools import Suspend, Tool, ToolContext, ToolError, ToolFailure, tool

__all__ = [
    "AbortSignal",
    "Aborted",
    "AgentBehaviorInput",
    "AgentContract",
    "AgentDefinition",
    "AgentDefinitionError",
    "Capability",
    "CapabilityBindingError",
    "CapabilityFactory",
    "ClaimedRun",
    "Command",
    "CommandContext",
    "CommandError",
    "CommandRun",
    "EventSink",
    "FileProvider",
    "FileRef",
    "InMemoryThreadStore",
    "LanguageModel",
    "Lease",
    "LeaseLost",
    "ModelRequest",
    "ModelSelection",
    "ModelSettings",
    "ProviderTool",
    "ReasoningSummary",
    "ReasoningSummaryInput",
    "RecordingSink",
    "RunEngine",
    "RunOutcome",
    "ScriptedModel",
    "ScriptedStep",
    "ScriptedToolCall",
    "StepRecord",
    "SubagentTool",
    "Suspend",
    "SyncRunner",
    "ThreadStore",
    "ThreadTitleInput",
    "ThreadTitles",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolFailure",
    "Usage",
    "capability",
    "capability_factory",
    "command",
    "define_agent",
    "define_command",
    "run_sync",
    "subagent",
    "tool",
    "use_sync_runner",
]
