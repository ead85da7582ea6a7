"""The operator console: read-only views of runtime rows, changes through runtime actions.

Runtime-owned rows are never edited by hand (a hand-edited lease or message would break the
invariants the store keeps); operators cancel runs and re-dispatch stalled ones instead.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from pai_threads import services
from pai_threads.execution.recovery import recover_runs
from pai_threads.identity import Identity
from pai_threads.models import Message, PendingAction, QueueItem, Run, Step, Thread

__all__ = ["RunAdmin", "ThreadAdmin"]


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _pretty(value: Any) -> str:
    return format_html("<pre style='white-space:pre-wrap'>{}</pre>", json.dumps(value, indent=2))


class RunInline(admin.TabularInline):
    model = Run
    fields = ("id", "status", "initiator", "step_count", "attempt", "created_at", "finished_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Thread)
class ThreadAdmin(ReadOnlyAdmin):
    list_display = ("id", "title", "agent_name", "scope_key", "updated_at")
    list_filter = ("agent_name",)
    search_fields = ("id", "title", "scope_key")
    readonly_fields = (
        "id",
        "title",
        "agent_name",
        "scope_key",
        "version",
        "created_at",
        "updated_at",
        "public_metadata",
        "private",
    )
    exclude = ("metadata", "private_metadata")
    inlines = [RunInline]

    @admin.display(description="metadata")
    def public_metadata(self, obj: Thread) -> str:
        return _pretty(obj.metadata)

    @admin.display(description="private metadata")
    def private(self, obj: Thread) -> str:
        return _pretty(obj.private_metadata)


class StepInline(admin.TabularInline):
    model = Step
    fields = ("index", "finish_reason", "usage", "started_at", "finished_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "thread",
        "agent_name",
        "status",
        "initiator",
        "step_count",
        "attempt",
        "lease_owner",
        "created_at",
    )
    list_filter = ("status", "initiator", "agent_name")
    search_fields = ("id", "thread__id", "scope_key")
    readonly_fields = (
        "id",
        "thread",
        "scope_key",
        "agent_name",
        "status",
        "initiator",
        "lease_owner",
        "lease_expires_at",
        "lease_token",
        "attempt",
        "step_count",
        "cancel_requested_at",
        "created_at",
        "started_at",
        "finished_at",
        "usage_pretty",
        "error_pretty",
    )
    exclude = (
        "identity",
        "client_data",
        "metadata",
        "private_metadata",
        "usage",
        "error",
        "input_message_id",
    )
    inlines = [StepInline]
    actions = ["cancel_runs", "redispatch_stalled"]

    @admin.display(description="usage")
    def usage_pretty(self, obj: Run) -> str:
        return _pretty(obj.usage)

    @admin.display(description="error (private)")
    def error_pretty(self, obj: Run) -> str:
        return _pretty(obj.error)

    @admin.action(description="Cancel the selected runs")
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        for run in queryset:
            # Trusted operator action: act in the run's own scope (the cancel publishes).
            services.cancel_run(Identity(scope_key=run.scope_key), run.id)
        messages.info(request, f"Cancel requested for {queryset.count()} run(s).")

    @admin.action(description="Re-dispatch all stalled runs (sweeper)")
    def redispatch_stalled(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        messages.info(request, f"Re-dispatched {len(recover_runs())} stalled run(s).")


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = (
        "message_id",
        "thread",
        "role",
        "status",
        "producer",
        "step_index",
        "in_transcript",
        "in_context",
        "created_at",
    )
    list_filter = ("role", "status", "producer", "in_transcript")
    search_fields = ("message_id", "thread__id")
    readonly_fields = (
        "message_id",
        "thread",
        "run",
        "role",
        "status",
        "producer",
        "relation",
        "step_index",
        "in_transcript",
        "in_context",
        "created_at",
        "updated_at",
        "parts_pretty",
    )
    exclude = ("parts", "metadata", "private_metadata", "scope_key")

    @admin.display(description="parts")
    def parts_pretty(self, obj: Message) -> str:
        return _pretty(obj.parts)


@admin.register(QueueItem)
class QueueItemAdmin(ReadOnlyAdmin):
    list_display = ("id", "thread", "policy", "status", "created_at", "admitted_at")
    list_filter = ("status", "policy")


@admin.register(PendingAction)
class PendingActionAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "thread",
        "run",
        "tool_name",
        "kind",
        "status",
        "created_at",
        "resolved_at",
    )
    list_filter = ("status", "kind", "tool_name")
    search_fields = ("id", "run__id", "thread__id", "tool_call_id")
