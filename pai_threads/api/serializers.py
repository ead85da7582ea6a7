"""Client projections of stored rows, as the HTTP API names them.

Defined once in :mod:`pai_threads.events.projections` (every client surface uses them);
re-exported here for the API's modules and existing imports.
"""

from __future__ import annotations

from pai_threads.events.projections import (
    action_out,
    message_out,
    messages_out,
    queue_item_out,
    run_out,
    thread_out,
)

__all__ = ["action_out", "message_out", "messages_out", "queue_item_out", "run_out", "thread_out"]
