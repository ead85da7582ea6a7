"""What each hook receives: frozen values, field names as in the spec in snake_case.

Building an input loads no history (LC-020): durable state is reached through the lazy
``thread`` facade and, in resolve_model_context, the step-anchored ``history``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from pai_agents.abort import AbortSignal
from pai_agents.lifecycle.facade import (
    LifecycleMessage,
    LifecycleThread,
    MessageOrder,
    MessageView,
    MessageVisibility,
    Page,
    ResolverThread,
    RunMetadataClient,
)
from pai_agents.lifecycle.request import ModelStepRequest
from pai_agents.lifecycle.results import ToolResult
from pai_agents.lifecycle.suspensions import SuspensionEpisode
from pai_agents.messages.types import UIMessage, UIMessageChunk
from pai_agents.models.base import ModelMessage, StepStreamPart, Usage

__all__ = [
    "AfterStepInfo",
    "AfterStepInput",
    "AfterToolResultInput",
    "BeforeToolCallInput",
    "ExecutionInfo",
    "HistoryRewrite",
    "HistoryRewrittenInput",
    "InitialEntry",
    "LifecycleBase",
    "LifecycleModelHistory",
    "LifecycleRun",
    "PrepareHistoryRewriteInput",
    "PrepareModelStepInput",
    "PrepareRunInput",
    "RegenerateRewrite",
    "ResolveModelContextInput",
    "ResumeEntry",
    "RunFinishedInput",
    "StepAbortFn",
    "StepInfo",
    "StepStream",
    "StepToolCall",
    "ToolCallInfo",
    "ToolExecutionEntry",
    "ToolInfo",
    "TransformStepStreamInput",
    "UiDataWriter",
    "VisibilityChange",
    "VisibilityRewrite",
]

Operation: TypeAlias = Literal["send", "trigger", "regenerate", "resume"]
StepStream: TypeAlias = AsyncIterator[StepStreamPart]


@dataclass(frozen=True, kw_only=True)
class ExecutionInfo:
    """The current execution episode: ``resume`` after a waiting boundary (LC-008)."""

    operation: Operation
    started_at: str


@dataclass(frozen=True, kw_only=True)
class LifecycleRun:
    """Stable run identity; ``initiator`` and ``started_at`` never change on resume."""

    run_id: str
    thread_id: str
    initiator: Literal["send", "trigger", "regenerate"]
    started_at: str
    execution: ExecutionInfo
    private_metadata: RunMetadataClient
    metadata: RunMetadataClient

    def __post_init__(self) -> None:
        if self.initiator not in ("send", "trigger", "regenerate"):  # LC-006
            raise ValueError(f"run initiator must be send, trigger or regenerate: {self.initiator}")


@dataclass(frozen=True, kw_only=True)
class StepInfo:
    step_id: str
    index: int


@dataclass(frozen=True, kw_only=True)
class LifecycleBase:
    runtime_context: Any
    run: LifecycleRun
    thread: LifecycleThread
    signal: AbortSignal


@dataclass(frozen=True, kw_only=True)
class PrepareRunInput(LifecycleBase):
    input: Any = None
    latest_user_message: LifecycleMessage | None = None


class LifecycleModelHistory(Protocol):
    """The thread as it stood when the step started; later appends never show (LC-047)."""

    @property
    def through(self) -> LifecycleMessage | None:
        """The newest physical message at step start, None on an empty thread (LC-044)."""
        ...

    async def collect(
        self,
        *,
        view: MessageView = "context",
        order: MessageOrder = "asc",
        after_message_id: str | None = None,
    ) -> list[LifecycleMessage]:
        """Every page, ``through`` included when it matches (LC-045)."""
        ...

    async def before(
        self,
        *,
        view: MessageView = "context",
        order: MessageOrder = "asc",
        after_message_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> Page[LifecycleMessage]:
        """Pages strictly older than ``through`` (LC-046)."""
        ...

    async def model_messages(
        self,
        *,
        view: MessageView = "context",
        order: MessageOrder = "asc",
        after_message_id: str | None = None,
    ) -> list[ModelMessage]:
        """The converted selection, to bypass ``next()`` (LC-048)."""
        ...


@dataclass(frozen=True, kw_only=True)
class ResolveModelContextInput:
    runtime_context: Any
    run: LifecycleRun
    thread: ResolverThread
    signal: AbortSignal
    step: StepInfo
    history: LifecycleModelHistory


@dataclass(frozen=True, kw_only=True)
class PrepareModelStepInput(LifecycleBase):
    step: StepInfo
    input: ModelStepRequest


class UiDataWriter(Protocol):
    def write(self, chunk: Mapping[str, Any]) -> UIMessageChunk:
        """Validate and forward one registered ``data-*`` chunk (LC-112, LC-113)."""
        ...


StepAbortFn: TypeAlias = Callable[..., Awaitable[Any]]


@dataclass(frozen=True, kw_only=True)
class TransformStepStreamInput(LifecycleBase):
    step: StepInfo
    stream: StepStream
    input: ModelStepRequest
    ui_data: UiDataWriter
    # abort(reason, *, outcome="blocked", message=None, replacement=None) never returns.
    abort: StepAbortFn


@dataclass(frozen=True, kw_only=True)
class ToolInfo:
    name: str
    source: Literal["backend", "client", "mcp", "subagent"] = "backend"
    description: str | None = None


@dataclass(frozen=True, kw_only=True)
class ToolCallInfo:
    tool_call_id: str


@dataclass(frozen=True, kw_only=True)
class InitialEntry:
    type: Literal["initial"] = "initial"


@dataclass(frozen=True, kw_only=True)
class ResumeEntry:
    """A suspended tool resuming: its name, resume payload and pending action (LC-133).

    ``name`` is the tool's name (LC-133); ``suspension`` the name of the suspension being
    answered (``"approval"``, ``"client"`` or a declared one, docs/suspensions.md)."""

    name: str
    resume: Any
    action: Mapping[str, Any]
    type: Literal["resume"] = "resume"
    suspension: str = ""


ToolExecutionEntry: TypeAlias = InitialEntry | ResumeEntry


@dataclass(frozen=True, kw_only=True)
class BeforeToolCallInput(LifecycleBase):
    step: StepInfo
    tool: ToolInfo
    call: ToolCallInfo
    input: Any
    entry: ToolExecutionEntry = field(default_factory=InitialEntry)
    # The call's earlier durable suspensions, oldest first: empty on an initial entry,
    # loaded only when the call resumes (LC-132, LC-133).
    suspend_history: Sequence[SuspensionEpisode] = ()


@dataclass(frozen=True, kw_only=True)
class AfterToolResultInput(BeforeToolCallInput):
    """``duration_ms`` is the wall-clock execution time when the tool executed (TH-038);
    None for results that were not executed here (skip, reject, client, cancel, ...)."""

    result: ToolResult
    duration_ms: float | None = None


@dataclass(frozen=True, kw_only=True)
class StepToolCall:
    tool_call_id: str
    tool_name: str
    input: Any = None
    provider_executed: bool = False


@dataclass(frozen=True, kw_only=True)
class AfterStepInfo:
    """One finished step as after_step sees it (LC-143, TH-039).

    ``finish_reason`` is the normalized reason (``stop``, ``length``, ``tool-calls``, ...),
    ``raw_finish_reason`` the provider's own word for it. ``provider_metadata`` is what the
    provider reported beside the standard fields, keyed by provider (the finish part's
    ``providerMetadata``, e.g. cache accounting); ``response_metadata`` the response's
    ``id``/``modelId``; ``request_metadata`` the request as the step record stores it
    (provider, model, settings, tool names, message count); ``warnings`` the provider's
    call warnings (its ``stream-start`` part).
    """

    step_id: str
    index: int
    message: LifecycleMessage
    finish_reason: str
    tool_calls: tuple[StepToolCall, ...] = ()
    provider_metadata: Mapping[str, Any] | None = None
    usage: Usage | None = None
    raw_finish_reason: str | None = None
    warnings: tuple[Any, ...] = ()
    request_metadata: Mapping[str, Any] | None = None
    response_metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class AfterStepInput(LifecycleBase):
    step: AfterStepInfo
    request: ModelStepRequest


@dataclass(frozen=True, kw_only=True)
class RegenerateRewrite:
    target_message_id: str
    retained_message_ids: tuple[str, ...]
    removed_message_ids: tuple[str, ...]
    before_version: int
    after_version: int | None = None
    kind: Literal["regenerate"] = "regenerate"


@dataclass(frozen=True, kw_only=True)
class VisibilityChange:
    message_id: str
    before: MessageVisibility
    after: MessageVisibility


@dataclass(frozen=True, kw_only=True)
class VisibilityRewrite:
    changes: tuple[VisibilityChange, ...]
    before_version: int
    after_version: int | None = None
    kind: Literal["visibility"] = "visibility"


HistoryRewrite: TypeAlias = RegenerateRewrite | VisibilityRewrite


@dataclass(frozen=True, kw_only=True)
class PrepareHistoryRewriteInput:
    """Before a rewrite commits; returned patches share its transaction (LC-057..LC-060)."""

    runtime_context: Any
    thread_id: str
    rewrite: HistoryRewrite
    version: int
    private_metadata: Mapping[str, Any]
    metadata: Mapping[str, Any]
    signal: AbortSignal


@dataclass(frozen=True, kw_only=True)
class HistoryRewrittenInput:
    """After commit, best effort; ``rewrite.after_version`` is set (LC-062)."""

    runtime_context: Any
    thread_id: str
    rewrite: HistoryRewrite
    signal: AbortSignal


@dataclass(frozen=True, kw_only=True)
class RunFinishedInput:
    """Post-commit observer input (peer parity, TH-041): the run lock is already released.

    ``status`` folds the run status: completed/blocked -> completed, failed -> error,
    cancelled -> aborted; ``run_status`` keeps the exact one. ``error`` is client-safe text.
    """

    run_id: str
    thread_id: str
    status: Literal["completed", "error", "aborted"]
    run_status: Literal["completed", "blocked", "failed", "cancelled"]
    message: UIMessage | None
    continuation: bool
    runtime_context: Any = None
    error: str | None = None
