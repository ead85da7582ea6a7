"""The pending-action sidecar of one tool part (MF-024).

Defined in :mod:`pai_threads.services.actions`, with the answers it submits; kept here
for existing imports.
"""

from pai_threads.services.actions import PendingActionView, answered_message, get_pending_action

__all__ = ["PendingActionView", "answered_message", "get_pending_action"]
