"""Runs in the console: status and lease, one timeline of their attempts and steps, and the
sub-agent runs they started (docs/subagents.md)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from pai_threads.admin.attempts import RunAttemptInline, attempt_timeline
from pai_threads.admin.base import (
    ReadOnlyAdmin,
    ReadOnlyInline,
    json_display,
    tokens_line,
    usage_block,
)
from pai_threads.admin.operate import change_url
from pai_threads.admin.run_actions import RunOperations
from pai_threads.admin.steps import StepInline
from pai_threads.models import Run, Step
from pai_threads.usage import usage_totals

__all__ = ["RunAdmin", "SubagentRunInline", "run_link"]


def run_link(run_id: str) -> SafeString:
    """A link to a run's page from its id alone (no query for the row)."""
    return format_html("<a href='{}'>{}</a>", change_url(Run(pk=run_id)), run_id)


class SubagentRunInline(ReadOnlyInline):
    """The child runs of this run's sub-agent tool calls, each linked to its page and thread;
    one query for all of them (their threads joined)."""

    model = Run
    fk_name = "parent_run"
    verbose_name = "sub-agent run"
    verbose_name_plural = "sub-agent runs"
    fields = (
        "id",
        "agent_name",
        "status",
        "tool_call",
        "thread",
        "tokens",
        "created_at",
    )
    readonly_fields = fields
    ordering = ("created_at",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        return super().get_queryset(request).select_related("thread")

    @admin.display(description="tool call")
    def tool_call(self, obj: Run) -> str:
        return obj.parent_tool_call_id

    @admin.display(description="tokens")
    def tokens(self, obj: Run) -> str:
        return tokens_line(obj.usage)


@admin.register(Run)
class RunAdmin(RunOperations, ReadOnlyAdmin):
    list_display = (
        "id",
        "thread",
        "agent_name",
        "status",
        "initiator",
        "parent_column",
        "step_count",
        "attempt",
        "created_at",
    )
    # initiator "subagent" lists the child runs of sub-agent calls.
    list_filter = ("status", "initiator", "agent_name", "created_at")
    # A run id also finds the sub-agent runs it started.
    search_fields = ("id", "thread__id", "thread__title", "scope_key", "parent_run__id")
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
    inlines = [SubagentRunInline, RunAttemptInline, StepInline]

    usage_pretty = json_display("usage", "usage")

    public_metadata = json_display("metadata", "metadata")

    error_pretty = json_display("error", "error (private details)")

    private_metadata_pretty = json_display("private_metadata", "private metadata")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        """A sub-agent run shows its parent right after its initiator."""
        fields = super().get_fields(request, obj)
        if obj is None or (obj.parent_run_id is None and obj.initiator != Run.Initiator.SUBAGENT):
            return fields
        after = fields.index("initiator") + 1
        return (*fields[:after], "parent", *fields[after:])

    @admin.display(description="parent run")
    def parent(self, obj: Run) -> SafeString:
        """The run whose tool call this run answers (SET_NULL: a parent deleted with its
        thread leaves the tool call id alone)."""
        if obj.parent_run is None:
            return format_html(
                "<em>deleted</em> · tool call <code>{}</code>", obj.parent_tool_call_id
            )
        return format_html(
            "{} · agent {} · {} · tool call <code>{}</code>",
            run_link(obj.parent_run.id),
            obj.parent_run.agent_name,
            obj.parent_run.status,
            obj.parent_tool_call_id,
        )

    @admin.display(description="parent", ordering="parent_run")
    def parent_column(self, obj: Run) -> SafeString | str:
        return run_link(obj.parent_run_id) if obj.parent_run_id else "—"

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
