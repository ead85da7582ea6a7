"""Client-visible JSON of threads, runs and messages, and the connect-time snapshot.

Built from the HTTP API's schemas so both surfaces show one shape (camelCase, ISO dates).
Private columns (``private_metadata``, the run's ``identity``, ``client_data`` and stored
``error``) never reach these functions' output (LC-030, AD-034, AD-037).
"""

from __future__ import annotations

from typing import Any

from pai_threads import services
from pai_threads.api.schemas import ActionOut, QueueItemOut, RunOut, ThreadOut
from pai_threads.api.serializers import (
    action_out,
    message_out,
    messages_out,
    queue_item_out,
    run_out,
    thread_out,
)
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, QueueItem, Run, Thread

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


def thread_public(thread: Thread) -> dict[str, Any]:
    return ThreadOut.model_validate(thread_out(thread)).model_dump(by_alias=True, mode="json")


def run_public(run: Run) -> dict[str, Any]:
    return RunOut.model_validate(run_out(run)).model_dump(by_alias=True, mode="json")


def message_public(message: Message) -> dict[str, Any]:
    return message_out(message)


def queue_item_public(item: QueueItem) -> dict[str, Any]:
    return QueueItemOut.model_validate(queue_item_out(item)).model_dump(by_alias=True, mode="json")


def queue_public(thread_id: str) -> dict[str, Any]:
    """Queued inputs (MF-035): each item carries complete projected user messages."""
    items = QueueItem.objects.filter(thread_id=thread_id, status=QueueItem.Status.QUEUED)
    return {"items": [queue_item_public(item) for item in items.order_by("created_at", "id")]}


def actions_public(thread_id: str) -> list[dict[str, Any]]:
    """Pending actions, joined by clients to tool parts through ``toolCallId`` (MF-024)."""
    actions = PendingAction.objects.filter(
        thread_id=thread_id, status=PendingAction.Status.PENDING
    ).order_by("created_at", "id")
    return [
        ActionOut.model_validate(action_out(a)).model_dump(by_alias=True, mode="json")
        for a in actions
    ]


def side_state_events(thread_id: str) -> list[dict[str, Any]]:
    """``queue.changed`` and ``actions.changed`` with the current values: published after
    anything that may change them (run status changes, sends, answers, cancels)."""
    return [
        {"type": "queue.changed", "threadId": thread_id, "queue": queue_public(thread_id)},
        {
            "type": "actions.changed",
            "threadId": thread_id,
            "pendingActions": actions_public(thread_id),
        },
    ]


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
