"""Combining abort signals: an attempt signal plus the run's, either one aborts (LC-094)."""

from __future__ import annotations

from pai_agents.abort import AbortSignal

__all__ = ["combine_signals"]


def combine_signals(*signals: AbortSignal) -> AbortSignal:
    """A new signal that fires as soon as any of ``signals`` fires, with its reason."""
    combined = AbortSignal()
    for signal in signals:

        def forward(source: AbortSignal = signal) -> None:
            combined.abort(source.reason or "aborted")

        signal.on_abort(forward)
    return combined
