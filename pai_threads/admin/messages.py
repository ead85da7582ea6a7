"""Messages in the console: rendered by part type, searchable by text and run id."""

from __future__ import annotations

from django.contrib import admin
from django.utils.safestring import SafeString

from pai_threads.admin.base import ReadOnlyAdmin, json_display
from pai_threads.admin.parts import part_summary, render_parts
from pai_threads.admin.visibility import VisibilityActions
from pai_threads.models import Message

__all__ = ["MessageAdmin"]


@admin.register(Message)
class MessageAdmin(VisibilityActions, ReadOnlyAdmin):
    list_display = (
        "message_id",
        "thread",
        "role",
        "status",
        "producer",
        "visibility",
        "summary",
        "created_at",
    )
    list_filter = ("role", "status", "producer", "in_transcript", "in_context", "created_at")
    # ``parts`` matches the message text (a JSON icontains on the stored parts).
    search_fields = ("message_id", "thread__id", "run__id", "parts")
    list_select_related = ("thread",)
    public_fields = (
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
        "rendered_parts",
        "public_metadata",
        "usage",
        "diagnostics",
    )
    private_fields = ("private_metadata_pretty",)

    @admin.display(description="visible in")
    def visibility(self, obj: Message) -> str:
        places = [
            name
            for name, shown in (("transcript", obj.in_transcript), ("context", obj.in_context))
            if shown
        ]
        return " + ".join(places) or "hidden"

    @admin.display(description="content")
    def summary(self, obj: Message) -> str:
        return part_summary(obj.parts, 60)

    @admin.display(description="parts")
    def rendered_parts(self, obj: Message) -> SafeString:
        return render_parts(obj.parts)

    public_metadata = json_display("metadata", "metadata")

    private_metadata_pretty = json_display("private_metadata", "private metadata")
