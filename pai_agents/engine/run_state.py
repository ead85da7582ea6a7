"""The state one execution episode shares between its parts.

The episode loop (``episode.py``), one model step (``model_step.py``), the tool step
(``tool_step.py``), resuming what a previous episode left (``resume.py``) and the endings
(``endings.py``) all read and update one :class:`RunState`. It holds the run's claim, the
agent and its lifecycle (with the set of phases actually overridden, so an unused phase
costs nothing), the resolved model, the context-visible history and the usage so far.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast

from pai_agents.abort import AbortSignal
from pai_agents.agent import AgentBehaviorInput, AgentDefinition
from pai_agents.engine.events import EventSink
from pai_agents.engine.facades import Facades, bind_facades
from pai_agents.engine.model_retry import RetryPolicy
from pai_agents.engine.store import ClaimedRun, ThreadStore
from pai_agents.files import FileProvider, to_model_messages_with_files
from pai_agents.lifecycle.compose import ComposedLifecycle, compose_lifecycle
from pai_agents.lifecycle.hooks import overridden_phases
from pai_agents.lifecycle.inputs import ExecutionInfo, LifecycleRun
from pai_agents.lifecycle.overlay import EpisodeState
from pai_agents.lifecycle.reasoning import HiddenReasoning
from pai_agents.lifecycle.suspensions import SuspensionEpisode
from pai_agents.messages.types import UIMessage
from pai_agents.models.base import ModelMessage, ModelSelection, Usage
from pai_agents.tools import Tool

__all__ = ["TOOL_PHASES", "Operation", "RunState", "operation_of"]

Operation = Literal["send", "trigger", "regenerate", "resume"]

TOOL_PHASES = frozenset({"before_tool_call", "after_tool_result"})


def operation_of(claim: ClaimedRun) -> Operation:
    """How the run's current episode started (as lifecycle hooks see it)."""
    if claim.step_count > 0 or claim.last_message is not None:
        return "resume"
    initiator = claim.initiator
    return cast(Operation, initiator if initiator in ("send", "trigger", "regenerate") else "send")


@dataclass(kw_only=True, eq=False)
class RunState:
    """One episode of one claimed run (see the module docstring)."""

    agent: AgentDefinition
    store: ThreadStore
    sink: EventSink
    claim: ClaimedRun
    signal: AbortSignal
    checkpoint_seconds: float
    files: FileProvider | None
    # The engine's defaults; the agent's options and the run's patch override them.
    max_retries: int = 2
    retry_backoff_seconds: float = 0.5
    max_tool_calls_per_step: int = 32
    # The runtime's capability bindings by id; ``capabilities``: this episode's resolved ones.
    capability_bindings: Mapping[str, Any] = field(default_factory=dict)
    capabilities: dict[str, Any] = field(default_factory=dict)
    lifecycle: ComposedLifecycle = field(init=False)
    phases: frozenset[str] = field(init=False)
    behavior: AgentBehaviorInput = field(init=False)
    facades: Facades = field(init=False)
    run_info: LifecycleRun = field(init=False)
    episode: EpisodeState = field(init=False)
    selection: ModelSelection = field(init=False)
    history: list[UIMessage] = field(default_factory=list)
    usage: Usage = field(init=False)
    # The message the run ended with, for run_finished (TH-041).
    final_message: UIMessage | None = None
    # The latest step whose open message a checkpoint stored: a run that fails without
    # committing it drops it (LC-116; a row already committed is not open, so not dropped).
    open_step: int | None = None
    # LC-121: the parsed input of each validated call, so nothing parses it again.
    parsed: dict[str, Any] = field(default_factory=dict)
    # LC-133: resumed calls' suspension episodes (loaded on resume; empty otherwise).
    suspensions: dict[str, tuple[SuspensionEpisode, ...]] = field(default_factory=dict)
    # The calls whose episodes were read (prepare_run's input may read them first, LC-069).
    suspensions_read: set[str] = field(default_factory=set)
    hidden: HiddenReasoning = field(default_factory=HiddenReasoning)  # TH-016
    tool_specs: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        if self.agent.max_tool_calls_per_step is not None:
            self.max_tool_calls_per_step = self.agent.max_tool_calls_per_step
        self.lifecycle = self.agent.lifecycle or compose_lifecycle()
        self.phases = frozenset(overridden_phases(self.lifecycle))
        self.episode = EpisodeState.start(None, agent_max_steps=self.agent.max_steps)
        self.usage = cast(Usage, dict(self.claim.usage))
        self.tool_specs = {name: t.spec() for name, t in self.agent.tools.items()}
        self.behavior = self._behavior(None)

    def add_tools(self, tools: Mapping[str, Tool]) -> None:
        """Tools known only for this episode (an MCP server's, listed at its start) join the
        agent's: the episode runs a copy of the definition, so every part that reads
        ``agent.tools`` (advertising, validation, approvals, hooks, recovery) sees them."""
        if not tools:
            return
        self.agent = dataclasses.replace(self.agent, tools={**self.agent.tools, **tools})
        self.tool_specs.update({name: t.spec() for name, t in tools.items()})

    @property
    def lease(self) -> Any:
        return self.claim.lease

    @property
    def operation(self) -> Operation:
        return operation_of(self.claim)

    def retry_policy(self, step_retries: int | None = None) -> RetryPolicy:
        """Retries of a step after transient provider faults: the step patch's
        ``max_retries``, else the prepare_run patch's (TH-019), else the agent's, else the
        engine's."""
        patch = self.episode.run_patch
        retries = step_retries
        if retries is None and patch is not None:
            retries = patch.max_retries
        if retries is None:
            retries = self.agent.max_retries
        if retries is None:
            retries = self.max_retries
        return RetryPolicy(max_retries=retries, base_seconds=self.retry_backoff_seconds)

    @property
    def runtime_context(self) -> Any:
        return self.behavior.runtime_context

    def bind(self, runtime_context: Any) -> None:
        """The run's runtime context is built: make the inputs every hook receives."""
        claim, lease = self.claim, self.claim.lease
        self.behavior = self._behavior(runtime_context)
        self.facades = bind_facades(
            self.store, lease, schemas=self.agent.metadata_schemas, needed=bool(self.phases)
        )
        initiator = claim.initiator
        episode_start = datetime.now(UTC)
        # LC-007: the start the store recorded at the run's first claim, the same in every
        # episode. LC-008: the episode's own start; the first episode is the run's start.
        run_start = (claim.started_at or episode_start).astimezone(UTC)
        if claim.attempt <= 1:
            episode_start = run_start
        self.run_info = LifecycleRun(
            run_id=lease.run_id,
            thread_id=claim.thread_id,
            initiator=cast(
                Any, initiator if initiator in ("send", "trigger", "regenerate") else "send"
            ),
            started_at=run_start.isoformat(),
            execution=ExecutionInfo(operation=self.operation, started_at=episode_start.isoformat()),
            private_metadata=self.facades.private_metadata,
            metadata=self.facades.metadata,
        )

    def hook_base(self) -> dict[str, Any]:
        """The fields every hook input starts with."""
        return {
            "runtime_context": self.runtime_context,
            "run": self.run_info,
            "thread": self.facades.thread,
            "signal": self.signal,
        }

    async def model_context(self, history: list[UIMessage]) -> list[ModelMessage]:
        """The stored history as model messages, file references materialized in the run's
        partition, reasoning kept from clients restored; ``history`` is unchanged (MF-031,
        MF-039)."""
        return await to_model_messages_with_files(
            self.hidden.restore(history),
            self.files,
            scope_key=self.claim.scope_key,
            thread_id=self.claim.thread_id,
        )

    def _behavior(self, runtime_context: Any) -> AgentBehaviorInput:
        claim = self.claim
        return AgentBehaviorInput(
            identity=claim.identity,
            client_data=claim.client_data,
            runtime_context=runtime_context,
            thread_id=claim.thread_id,
            run_id=claim.lease.run_id,
            signal=self.signal,  # AD-013, AD-016
        )
