"""Uploaded files in the console: what was stored, where, and for which thread."""

from __future__ import annotations

from django.contrib import admin
from django.template.defaultfilters import filesizeformat

from pai_threads.admin.base import ReadOnlyAdmin, json_display
from pai_threads.models import File

__all__ = ["FileAdmin"]


@admin.register(File)
class FileAdmin(ReadOnlyAdmin):
    list_display = ("id", "filename", "media_type", "size", "thread", "created_at")
    list_filter = ("media_type", "created_at")
    search_fields = ("id", "filename", "sha256", "thread__id", "scope_key")
    public_fields = (
        "id",
        "filename",
        "media_type",
        "size",
        "sha256",
        "storage_name",
        "scope_key",
        "thread",
        "created_at",
        "public_metadata",
    )

    @admin.display(description="size", ordering="byte_size")
    def size(self, obj: File) -> str:
        return filesizeformat(obj.byte_size)

    public_metadata = json_display("metadata", "metadata")
