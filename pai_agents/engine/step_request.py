"""What one model step asks the model: its context and its layered request.

The context is the context-visible history, through ``resolve_model_context`` when a part
overrides it (memoized middleware over the history anchored at step start, the store's
context as the leaf). The request layers the agent, prepare_run's episode defaults and the
overlay a previous step left (``EpisodeState.step_request``).
"""

from __future__ import annotations

from collections.abc import Sequence

from pai_agents.engine.run_state import RunState
from pai_agents.engine.tool_enablement import enabled_tools
from pai_agents.lifecycle.history import AnchoredHistory
from pai_agents.lifecycle.inputs import ResolveModelContextInput, StepInfo
from pai_agents.lifecycle.request import ModelStepRequest
from pai_agents.models.base import ModelMessage

__all__ = ["step_context", "step_request"]


async def step_context(state: RunState, step: StepInfo) -> list[ModelMessage]:
    """The step's base context: the store's context, through resolve_model_context."""
    lease = state.lease
    if "resolve_model_context" not in state.phases:
        if state.phases:  # a hook may have written the thread since the last load
            state.history = await state.store.load_context(lease)
        return await state.model_context(state.history)
    anchored = await AnchoredHistory.anchor(state.facades.resolver_thread.messages)  # LC-044
    through = anchored.through

    async def leaf() -> list[ModelMessage]:
        # LC-043 / LC-047: every context message up to the step's anchor, no later ones.
        history = await state.store.load_context(lease)
        if through is None:
            history = []
        else:
            ids = [m["id"] for m in history]
            if through.id in ids:
                history = history[: ids.index(through.id) + 1]
            else:  # the anchor is hidden from context: drop what came after it
                later = await _context_after(state, through.id)
                history = [m for m in history if m["id"] not in later]
        state.history = history
        return await state.model_context(history)

    resolved = await state.lifecycle.resolve_model_context(
        ResolveModelContextInput(
            runtime_context=state.runtime_context,
            run=state.run_info,
            thread=state.facades.resolver_thread,
            signal=state.signal,
            step=step,
            history=anchored,
        ),
        leaf,
    )
    return list(resolved)


async def _context_after(state: RunState, message_id: str) -> set[str]:
    """Ids of the context-visible messages stored after ``message_id`` (LC-047: appended
    after the step started; usually none, so this reads one short page)."""
    later: set[str] = set()
    token: str | None = None
    while True:
        page = await state.facades.resolver_thread.messages.list(
            view="context", after_message_id=message_id, page_token=token
        )
        later.update(m.id for m in page.items)
        token = page.next_page_token
        if token is None:
            return later


async def step_request(
    state: RunState, index: int, messages: Sequence[ModelMessage]
) -> ModelStepRequest:
    """The step's effective request before prepare_model_step."""
    instructions = (
        await state.agent.resolve_instructions(state.behavior)
        if state.episode.needs_instructions
        else None
    )  # AD-026
    return state.episode.step_request(
        state.selection,
        instructions=instructions,
        resolved_context=messages,
        tools=await enabled_tools(state),
        provider_tools=dict(state.agent.provider_tools),  # AD-071: declared, then patched
        run_id=state.lease.run_id,
        thread_id=state.claim.thread_id,
        step_index=index,
        signal=state.signal,
        runtime_context=state.runtime_context,
    )
