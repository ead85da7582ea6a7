"""What every console page shares: rows are read-only, private data needs a permission.

Runtime-owned rows are never edited by hand (a hand-edited lease or message would break the
invariants the store keeps); operators change them through runtime actions instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

__all__ = [
    "PRIVATE_PERMISSION",
    "WITHHELD",
    "ReadOnlyAdmin",
    "ReadOnlyInline",
    "can_see_private",
    "json_display",
    "pretty_json",
    "short",
    "tokens_line",
    "usage_block",
]

# Private metadata and private error details are for operators who hold this permission
# (superusers hold every permission); everyone else sees that something is withheld.
PRIVATE_PERMISSION = "pai_threads.view_private_metadata"
WITHHELD = "withheld: needs the “Can view private metadata and error details” permission"


def can_see_private(request: HttpRequest) -> bool:
    """Whether the request's user may read private metadata and private error details."""
    user = getattr(request, "user", None)
    return bool(user is not None and user.has_perm(PRIVATE_PERMISSION))


def pretty_json(value: Any) -> SafeString:
    """A JSON value as an escaped, wrapped block."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return format_html("<pre class='pai-json'>{}</pre>", text)


def json_display(field: str, description: str) -> Callable[[Any, Any], SafeString]:
    """A change-page field that shows the JSON column ``field`` as :func:`pretty_json`."""

    def show(model_admin: Any, obj: Any) -> SafeString:
        return pretty_json(getattr(obj, field))

    return admin.display(description=description)(show)


def usage_block(totals: Any) -> SafeString:
    """A :class:`~pai_threads.usage.UsageTotals` as operators read it: tokens and cost."""
    data = totals.as_json()
    data.pop("key", None)
    return pretty_json(data)


def tokens_line(usage: Any) -> str:
    """A usage dict's tokens on one line, for list and inline columns."""
    usage = usage or {}
    return f"{usage.get('inputTokens', 0)} in / {usage.get('outputTokens', 0)} out"


def short(text: str, limit: int = 80) -> str:
    """One line of at most ``limit`` characters, for list columns that must fit 1280 px."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class ReadOnlyAdmin(admin.ModelAdmin):
    """A changelist and change page that show a runtime row and never write it.

    The change page shows ``public_fields``, then ``private_fields`` to operators holding
    :data:`PRIVATE_PERMISSION` and a "withheld" line to everyone else.
    """

    list_per_page = 50
    show_full_result_count = False  # a COUNT(*) of a large message table on every page
    public_fields: tuple[str, ...] = ()
    private_fields: tuple[str, ...] = ()

    class Media:
        css = {"all": ("pai/admin.css",)}

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if not self.private_fields:
            return self.public_fields
        if can_see_private(request):
            return self.public_fields + self.private_fields
        return (*self.public_fields, "private_withheld")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return self.get_fields(request, obj)

    @admin.display(description="private data")
    def private_withheld(self, obj: Any) -> SafeString:
        return format_html("<em>{}</em>", WITHHELD)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """Operator actions (``permissions=["operate"]``): the model's built-in change
        permission, although the row itself is never edited."""
        opts = self.opts
        return bool(request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}"))


class ReadOnlyInline(admin.TabularInline):
    """Related rows listed on a parent's page, linked, never edited."""

    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
