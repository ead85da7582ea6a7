"""Retrying a model step after a transient provider fault (``ModelError.retryable``).

A connection error, a timeout, 429 or a 5xx fails one attempt, not the run: the step is
attempted again after an exponential backoff (``base * 2**n``, capped, or the server's
``Retry-After`` when it is longer), at most ``max_retries`` times per step. The run's
``max_retries`` comes from its prepare_run patch (TH-019), else the agent, else the engine
(``PAI["MODEL_MAX_RETRIES"]``). A retried attempt that had streamed output restarts the
step's message for clients (``generation.started`` with ``restarted: true``; the SSE stream
sends ``reset-step``), so nothing is shown twice; what it spent is kept as estimated usage.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from pai_agents.abort import Aborted, AbortSignal
from pai_agents.models.base import ModelError

__all__ = ["RetryPolicy", "is_retryable", "wait_backoff"]

_MAX_DELAY_SECONDS = 30.0


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How often and how patiently one step is attempted again."""

    max_retries: int = 2
    base_seconds: float = 0.5

    def delay(self, retry: int, error: BaseException) -> float:
        """Seconds before retry number ``retry`` (0-based) after ``error``."""
        backoff = min(_MAX_DELAY_SECONDS, self.base_seconds * (2**retry))
        hint = getattr(error, "retry_after", None)
        if isinstance(hint, int | float) and hint > backoff:
            return min(_MAX_DELAY_SECONDS, float(hint))
        return backoff


def is_retryable(error: BaseException) -> bool:
    """A provider fault that may succeed when tried again."""
    return isinstance(error, ModelError) and error.retryable


async def wait_backoff(signal: AbortSignal, seconds: float) -> None:
    """Sleep ``seconds``; raise ``Aborted`` at once when the run is cancelled meanwhile."""
    signal.raise_if_aborted()
    aborted = asyncio.ensure_future(signal.wait())
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(aborted), timeout=seconds)
    finally:
        aborted.cancel()
    if signal.aborted:
        raise Aborted(signal.reason or "aborted")
