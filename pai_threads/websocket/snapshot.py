"""The connect-time snapshot a websocket client starts from, and the projections it uses.

The projections are defined once, in :mod:`pai_threads.events.projections` (re-exported
here for existing imports); the snapshot is what a websocket client starts from.
"""

from __future__ import annotations

from typing import Any

from pai_threads import services
from pai_threads.events.projections import (
    actions_public,
    message_public,
    messages_out,
    queue_item_public,
    queue_public,
    run_public,
    thread_public,
)
from pai_threads.events.types import side_state as side_state_events
from pai_threads.identity import Identity
from pai_threads.models import Run

__all__ = [
    "actions_public",
    "build_snapshot",
    "message_public",
    "queue_item_public",
    "queue_public",
    "run_public",
    "side_state_events",
    "thread_public",
]

SNAPSHOT_RUNS = 20


def build_snapshot(identity: Identity, thread_id: str) -> dict[str, Any]:
    """The thread state a client starts from; raises ``NotFound`` like the HTTP API."""
    thread = services.get_thread(identity, thread_id)
    page = services.list_messages(identity, thread_id)
    runs = list(Run.objects.filter(thread=thread).order_by("-created_at")[:SNAPSHOT_RUNS])
    runs.reverse()
    return {
        "thread": thread_public(thread),
        "messages": messages_out(page.items),
        "nextPageToken": page.next_page_token,
        "runs": [run_public(r) for r in runs],
        "queue": queue_public(thread.id),
        "pendingActions": actions_public(thread.id),
    }
