"""The run engine: executes claimed runs of one agent against a store.

``run_episode`` drives a claimed run until it ends or waits, holding its lease (renewed by a
:class:`~pai_agents.engine.lease_keeper.LeaseKeeper` while the model streams). The loop
itself is ``episode.py``; docs/architecture.md walks through it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from pai_agents.abort import AbortSignal
from pai_agents.agent import AgentDefinition
from pai_agents.capabilities import CapabilityBindingError, binding_problems
from pai_agents.engine.endings import fail_run
from pai_agents.engine.episode import run_episode_loop, run_finished
from pai_agents.engine.events import EventSink, NullSink
from pai_agents.engine.lease_keeper import LeaseKeeper
from pai_agents.engine.run_state import RunState
from pai_agents.engine.store import ClaimedRun, RunOutcome, ThreadStore
from pai_agents.files import FileProvider
from pai_agents.mcp.client import episode_tools
from pai_agents.mcp.config import MCPError

__all__ = ["RunEngine"]

logger = logging.getLogger("pai.engine")


@dataclass(kw_only=True)
class RunEngine:
    """Executes claimed runs of one agent against a store, publishing to a sink."""

    agent: AgentDefinition
    store: ThreadStore
    sink: EventSink = field(default_factory=NullSink)
    lease_seconds: float = 30.0
    # An open message is checkpointed at most this often while a step streams; a crash
    # then loses at most this much streamed output (the step itself is repeated).
    checkpoint_seconds: float = 2.0
    # Expands stored file references into model input before each call (MF-040); None
    # drops them, like any data part without a converter.
    files: FileProvider | None = None
    # Retries of a model step after a transient provider fault (ModelError.retryable), and
    # the first backoff (doubled each time); agents and prepare_run patches can override
    # the count. Validated tool calls executed per step; the rest get an error result.
    max_retries: int = 2
    retry_backoff_seconds: float = 0.5
    max_tool_calls_per_step: int = 32
    # Implementations of the agent's capabilities by id (docs/capabilities.md): an object, or
    # a capability_factory built per episode. Each required id must be bound (AD-063).
    capabilities: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = binding_problems(self.agent.capabilities, self.capabilities)
        if problems:
            listed = "; ".join(f"{key}: {why}" for key, why in problems.items())
            raise CapabilityBindingError(
                f"agent {self.agent.name!r} cannot run: capability bindings: {listed}"
            )

    async def run_episode(
        self, claim: ClaimedRun, *, signal: AbortSignal | None = None
    ) -> RunOutcome:
        """Execute until the run ends or waits; raise LeaseLost if another worker took over."""
        signal = signal or AbortSignal()
        state = RunState(
            agent=self.agent,
            store=self.store,
            sink=self.sink,
            claim=claim,
            signal=signal,
            checkpoint_seconds=self.checkpoint_seconds,
            files=self.files,
            max_retries=self.max_retries,
            retry_backoff_seconds=self.retry_backoff_seconds,
            max_tool_calls_per_step=self.max_tool_calls_per_step,
            capability_bindings=self.capabilities,
        )
        keeper = LeaseKeeper(
            self.store, claim.lease, lease_seconds=self.lease_seconds, signal=signal
        )
        async with keeper:
            outcome = await self._with_mcp_tools(state)
        # An outcome comes from the episode's ending write, fenced like every write: the
        # lease held when it committed (a lost one raises LeaseLost out of it). A loss the
        # keeper saw is then that write's own release of the lease (a heartbeat racing it),
        # or renewals that gave up while the lease still held: the run ended as stored.
        if keeper.lost:
            logger.info("run %s: its last heartbeat raced its ending write", claim.lease.run_id)
        await run_finished(state, outcome)  # post-commit, outside the lease
        return outcome

    async def _with_mcp_tools(self, state: RunState) -> RunOutcome:
        """Run the episode with its MCP servers' tools, listed now (so a changed tool list
        is seen by the next episode) and their sessions closed when it ends (docs/mcp.md).
        A required server that cannot be reached fails the run (``MCPServerUnavailable``),
        except a cancelled run, which is settled as cancelled without those tools."""
        if not self.agent.mcp_servers:
            return await run_episode_loop(state)
        async with AsyncExitStack() as stack:
            try:
                tools = await stack.enter_async_context(
                    episode_tools(self.agent.mcp_servers, state.behavior, taken=self.agent.tools)
                )
            except MCPError as exc:
                if not state.claim.cancel_requested:
                    return await fail_run(state, exc)
                tools = {}
            state.add_tools(tools)
            return await run_episode_loop(state)
