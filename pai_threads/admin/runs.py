"""Runs in the console: status and lease, and one timeline of their attempts and steps."""

from __future__ import annotations

from django.contrib import admin
from django.utils.safestring import SafeString

from pai_threads.admin.attempts import RunAttemptInline, attempt_timeline
from pai_threads.admin.base import ReadOnlyAdmin, json_display, usage_block
from pai_threads.admin.run_actions import RunOperations
from pai_threads.admin.steps import StepInline
from pai_threads.models import Run, Step
from pai_threads.usage import usage_totals

__all__ = ["RunAdmin"]


@admin.register(Run)
class RunAdmin(RunOperations, ReadOnlyAdmin):
    list_display = (
        "id",
        "thread",
        "agent_name",
        "status",
        "initiator",
        "step_count",
        "attempt",
        "created_at",
    )
    list_filter = ("status", "initiator", "agent_name", "created_at")
    search_fields = ("id", "thread__id", "thread__title", "scope_key")
    list_select_related = ("thread",)
    date_hierarchy = "created_at"
    public_fields = (
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
        "spent",
        "public_metadata",
        "timeline",
    )
    private_fields = ("error_pretty", "private_metadata_pretty")
    inlines = [RunAttemptInline, StepInline]

    usage_pretty = json_display("usage", "usage")

    public_metadata = json_display("metadata", "metadata")

    error_pretty = json_display("error", "error (private details)")

    private_metadata_pretty = json_display("private_metadata", "private metadata")

    @admin.display(description="tokens and cost (all steps)")
    def spent(self, obj: Run) -> SafeString:
        return usage_block(usage_totals(Step.objects.filter(run_id=obj.id)))

    @admin.display(description="attempts and steps")
    def timeline(self, obj: Run) -> SafeString:
        """Each claim (worker, lease token, how it ended and why), then the steps it
        committed: where a run was lost, recovered or resumed, read in order."""
        return attempt_timeline(
            obj.attempts.order_by("number"),
            obj.steps.select_related("message").order_by("index"),
        )
