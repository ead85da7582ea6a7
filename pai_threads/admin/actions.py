"""Pending actions and queued inputs in the console: what waits, for whom, and why."""

from __future__ import annotations

from django.contrib import admin

from pai_threads.admin.base import ReadOnlyAdmin, json_display, short
from pai_threads.admin.parts import part_summary
from pai_threads.models import PendingAction, QueueItem, Run

__all__ = ["PendingActionAdmin", "QueueItemAdmin", "effective_state"]

_ENDED = {Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED}
_OPEN = {PendingAction.Status.PENDING, PendingAction.Status.SUBMITTED}


def effective_state(action: PendingAction) -> str:
    """The action's state as an operator needs it: an ``executing`` or ``pending`` row whose
    run has ended is not waiting for anything any more, and says so."""
    run_status = action.run.status
    if action.status == PendingAction.Status.EXECUTING and run_status in _ENDED:
        return f"done (run {run_status})"
    if action.status in _OPEN and run_status in _ENDED:
        return f"{action.status}, run {run_status}: nothing waits"
    return str(action.status)


@admin.register(PendingAction)
class PendingActionAdmin(ReadOnlyAdmin):
    list_display = ("id", "thread", "tool_name", "kind", "state", "created_at", "resolved_at")
    list_filter = ("status", "kind", "tool_name", "created_at")
    search_fields = ("id", "run__id", "thread__id", "tool_call_id", "tool_name")
    list_select_related = ("run",)
    public_fields = (
        "id",
        "thread",
        "run",
        "message_id",
        "tool_call_id",
        "tool_name",
        "kind",
        "state",
        "status",
        "input_pretty",
        "request_pretty",
        "response_pretty",
        "submitted_by",
        "created_at",
        "resolved_at",
    )

    @admin.display(description="state", ordering="status")
    def state(self, obj: PendingAction) -> str:
        return effective_state(obj)

    input_pretty = json_display("input", "input")

    request_pretty = json_display("request", "request")

    response_pretty = json_display("response", "response")


@admin.register(QueueItem)
class QueueItemAdmin(ReadOnlyAdmin):
    list_display = ("id", "thread", "policy", "status", "content", "created_at", "admitted_at")
    list_filter = ("status", "policy", "created_at")
    search_fields = ("id", "thread__id", "message_id", "run__id")
    public_fields = (
        "id",
        "thread",
        "message_id",
        "policy",
        "status",
        "run",
        "created_at",
        "admitted_at",
        "message_pretty",
    )

    @admin.display(description="message")
    def content(self, obj: QueueItem) -> str:
        message = obj.message if isinstance(obj.message, dict) else {}
        return short(part_summary(message.get("parts")), 60)

    message_pretty = json_display("message", "message")
