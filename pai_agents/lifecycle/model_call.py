"""Running one model call through around_model_call, as the engine will.

:func:`run_model_call` gives the composed wrappers a ``next`` that applies their patch,
prunes stale reasoning right before the provider attempt (LC-097) and opens the provider
stream, so setup failures raise from ``next()`` where a wrapper can catch them (LC-095).
It then works out which request produced the returned stream and which tools may execute
(LC-128..LC-130).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from pai_agents._callables import call_user
from pai_agents.abort import AbortSignal
from pai_agents.lifecycle.hooks import AgentLifecycle
from pai_agents.lifecycle.patches import ModelCallPatch, apply_patch, coerce_patch
from pai_agents.lifecycle.request import ModelStepRequest, prune_request
from pai_agents.lifecycle.streams import ModelStepStreamResult, aclose_stream
from pai_agents.models.base import LanguageModel, ModelRequest, StepStreamPart

__all__ = ["ModelCallOutcome", "ProviderCall", "open_model_stream", "run_model_call"]

# Opens the provider stream for one attempt (already patched and pruned).
ProviderCall = Callable[[ModelStepRequest], Awaitable[ModelStepStreamResult]]


@dataclass(frozen=True, kw_only=True)
class ModelCallOutcome:
    """The step's stream plus the attempt request that is recorded for it (LC-101)."""

    result: ModelStepStreamResult
    request: ModelStepRequest
    executable_tools: frozenset[str]
    attempts: tuple[ModelStepRequest, ...]

    def may_execute(self, tool_name: str) -> bool:
        """Whether a tool call named by the model may run (LC-128, AD-057)."""
        return tool_name in self.executable_tools


async def run_model_call(
    lifecycle: AgentLifecycle, request: ModelStepRequest, provider: ProviderCall
) -> ModelCallOutcome:
    """Call ``lifecycle.around_model_call`` with a provider-backed ``next``.

    A stream returned by a wrapper is attributed to the attempt that produced it; with no
    attempt (a cached call, LC-096) to the unpatched request; when it cannot be identified
    after several attempts, a tool stays executable only if every attempt advertised it
    (LC-130).
    """
    attempts: list[tuple[ModelStepRequest, ModelStepStreamResult]] = []

    async def next_(patch: object = None) -> ModelStepStreamResult:
        final = (
            request if patch is None else apply_patch(request, coerce_patch(patch, ModelCallPatch))
        )
        attempt = prune_request(final)
        result = await provider(attempt)
        attempts.append((attempt, result))
        return result

    raw = await call_user(lifecycle.around_model_call, request, next_)
    result = raw if isinstance(raw, ModelStepStreamResult) else ModelStepStreamResult(stream=raw)
    history = tuple(a for a, _ in attempts)
    for attempt, produced in attempts:
        if produced is result or produced.stream is result.stream:
            return ModelCallOutcome(
                result=result,
                request=attempt,
                executable_tools=frozenset(attempt.tools),
                attempts=history,
            )
    if not attempts:
        return ModelCallOutcome(
            result=result,
            request=prune_request(request),
            executable_tools=frozenset(request.tools),
            attempts=(),
        )
    common = frozenset.intersection(*(frozenset(a.tools) for a in history))
    return ModelCallOutcome(
        result=result, request=history[-1], executable_tools=common, attempts=history
    )


async def open_model_stream(
    model: LanguageModel, request: ModelRequest, *, signal: AbortSignal | None = None
) -> ModelStepStreamResult:
    """Open ``model.stream`` and pull its first part, so setup errors raise here (LC-095).

    Errors after the first part arrive through the returned stream.
    """
    source = model.stream(request, signal=signal)
    try:
        first = await anext(source)
    except StopAsyncIteration:
        first = None

    async def replay() -> AsyncIterator[StepStreamPart]:
        # Closing the replay closes the model's stream (``async for`` alone would leave it
        # suspended until garbage collection, its provider connection open).
        try:
            if first is None:
                return
            yield first
            async for part in source:
                yield part
        finally:
            await aclose_stream(source)

    return ModelStepStreamResult(stream=replay())
