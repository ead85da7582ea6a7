"""Threads in the console: who owns them, which agent, what they hold, and whether a
sub-agent call made them (a hidden thread, docs/subagents.md)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from pai_threads.admin.base import ReadOnlyAdmin, ReadOnlyInline, json_display, short, usage_block
from pai_threads.admin.runs import run_link
from pai_threads.admin.thread_actions import ThreadOperations
from pai_threads.models import Run, Step, Thread
from pai_threads.usage import usage_totals

__all__ = ["RunInline", "ThreadAdmin"]


class RunInline(ReadOnlyInline):
    model = Run
    fields = ("id", "status", "initiator", "step_count", "attempt", "created_at", "finished_at")
    readonly_fields = fields
    ordering = ("-created_at",)


@admin.register(Thread)
class ThreadAdmin(ThreadOperations, ReadOnlyAdmin):
    list_display = ("id", "title_short", "agent_name", "scope_short", "archived", "updated_at")
    list_filter = (
        "agent_name",
        "archived",
        # "Not empty": the hidden threads of sub-agent calls, unlisted in the API.
        ("parent_run", admin.EmptyFieldListFilter),
        "title_source",
        "created_at",
        "updated_at",
    )
    search_fields = ("id", "title", "scope_key")
    date_hierarchy = "updated_at"
    public_fields = (
        "id",
        "title",
        "title_source",
        "agent_name",
        "scope_key",
        "archived",
        "version",
        "created_at",
        "updated_at",
        "public_metadata",
        "spent",
    )
    private_fields = ("private_metadata_pretty",)
    inlines = [RunInline]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        """A hidden sub-agent thread says so first: the API never lists it."""
        fields = super().get_fields(request, obj)
        if obj is None or obj.parent_run_id is None:
            return fields
        return ("hidden_subagent", *fields)

    @admin.display(description="sub-agent")
    def hidden_subagent(self, obj: Thread) -> SafeString:
        return format_html("Hidden sub-agent thread of run {}", run_link(obj.parent_run_id or ""))

    @admin.display(description="tokens and cost (all runs)")
    def spent(self, obj: Thread) -> SafeString:
        return usage_block(usage_totals(Step.objects.filter(run__thread_id=obj.id)))

    @admin.display(description="title", ordering="title")
    def title_short(self, obj: Thread) -> str:
        return short(obj.title, 48) or "—"

    @admin.display(description="scope", ordering="scope_key")
    def scope_short(self, obj: Thread) -> str:
        return short(obj.scope_key, 32)

    public_metadata = json_display("metadata", "metadata")

    private_metadata_pretty = json_display("private_metadata", "private metadata")
