"""Generating the summaries of one step's reasoning parts while the step streams.

The translator calls :meth:`ReasoningSummaries.closed` when a reasoning part ends (never on
a delta): its complete text is already folded into the generation's message, so a
background task starts summarizing it at once and the model stream goes on (AD-050). When
the stream is over, :meth:`ReasoningSummaries.flush` waits for the tasks still running (only
as long as they need, at most the option's ``timeout_seconds``, or until the run is
cancelled) and emits each summary as a reserved
``data-pai-reasoning-summary`` chunk of the same message, in ordinal order, before the
step's end chunks: published live, folded by every reducer and committed with the step, so
the summary stays with its reasoning part through refreshes (AD-051, MF-013).

Reasoning a run keeps from clients (``RunPatch(send_reasoning=False)``, TH-016) never
reaches the translator, so it is never summarized. A generator that fails is logged; the
part keeps no summary and the run is unaffected.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pai_agents.agent import AgentDefinition
from pai_agents.engine.generation import Generation
from pai_agents.engine.run_state import RunState, operation_of
from pai_agents.engine.step_stream import StepTranslator
from pai_agents.messages.reasoning_summary import reasoning_summary_chunk
from pai_agents.reasoning_summary import (
    ReasoningSummary,
    ReasoningSummaryInput,
    generate_reasoning_summary,
)

__all__ = ["ReasoningSummaries", "attach_reasoning_summaries"]

logger = logging.getLogger("pai.engine")


class ReasoningSummaries:
    """The summary tasks of one model step's message."""

    def __init__(
        self,
        agent: AgentDefinition,
        config: ReasoningSummary,
        ctx: RunState,
        generation: Generation,
    ) -> None:
        self._agent = agent
        self._config = config
        self._ctx = ctx
        self._generation = generation
        self._tasks: list[tuple[int, asyncio.Task[str | None]]] = []

    def closed(self, part_id: str) -> None:
        """A reasoning part ends: start its summary (AD-050). Called before the end chunk
        is folded, so the part is the last still-streaming reasoning part with that id."""
        ordinal = -1
        found: dict[str, Any] | None = None
        for part in self._generation.message["parts"]:
            if part.get("type") != "reasoning":
                continue
            ordinal += 1
            if part.get("id") == part_id and part.get("state") == "streaming":
                found = part
                break
        if found is None:
            return
        ctx, claim = self._ctx, self._ctx.claim
        started = claim.started_at.isoformat() if claim.started_at is not None else ""
        summary_input = ReasoningSummaryInput(
            thread_id=claim.thread_id,
            run_id=claim.lease.run_id,
            message_id=self._generation.message_id,
            reasoning_ordinal=ordinal,
            reasoning=str(found.get("text", "")),
            operation=operation_of(claim),
            started_at=started,
            identity=claim.identity,
            client_data=claim.client_data,
            runtime_context=ctx.behavior.runtime_context,
            signal=ctx.signal,
        )
        task = asyncio.create_task(
            asyncio.wait_for(
                generate_reasoning_summary(
                    self._agent, self._config, summary_input, selected=ctx.selection.model
                ),
                timeout=self._config.timeout_seconds,  # the step's end waits for it
            )
        )
        self._tasks.append((ordinal, task))

    async def flush(self) -> None:
        """Wait for the running summaries (or a cancel), then emit the ones produced."""
        if not self._tasks:
            return
        tasks = [task for _, task in self._tasks]
        pending = [task for task in tasks if not task.done()]
        if pending:
            aborted = asyncio.ensure_future(self._ctx.signal.wait())
            try:
                await asyncio.wait([*pending, aborted], return_when=asyncio.FIRST_COMPLETED)
                while not aborted.done() and not all(t.done() for t in pending):
                    await asyncio.wait([*pending, aborted], return_when=asyncio.FIRST_COMPLETED)
            finally:
                aborted.cancel()
        chunks = []
        for ordinal, task in self._tasks:
            summary = self._result(ordinal, task)
            if summary:
                chunks.append(reasoning_summary_chunk(ordinal, summary))
        self.cancel()
        if chunks:
            await self._generation.emit(*chunks)

    def cancel(self) -> None:
        """Stop the summaries still running (the step was abandoned or flushed)."""
        for _, task in self._tasks:
            if not task.done():
                task.cancel()
            elif not task.cancelled():
                task.exception()  # retrieved: an abandoned step's failure is not logged twice
        self._tasks = []

    def _result(self, ordinal: int, task: asyncio.Task[str | None]) -> str | None:
        if not task.done() or task.cancelled():
            return None
        error = task.exception()
        if error is not None:
            logger.warning(
                "reasoning summary %d of message %s failed: %s",
                ordinal,
                self._generation.message_id,
                type(error).__name__,
                extra={"run_id": self._ctx.claim.lease.run_id},
                exc_info=error,
            )
            return None
        return task.result()


def attach_reasoning_summaries(
    state: RunState, generation: Generation, translator: StepTranslator
) -> ReasoningSummaries | None:
    """The step's summaries, hooked to ``translator``'s reasoning ends; None when the agent
    has no ``reasoning_summary`` (AD-007)."""
    agent = state.agent
    if agent.reasoning_summary is None:
        return None
    summaries = ReasoningSummaries(agent, agent.reasoning_summary, state, generation)
    translator.on_reasoning_end = summaries.closed
    return summaries
