"""What every operator action shares: permission, the operator, the outcome, the history.

An action calls a runtime operation (never a row edit), reports its outcome as an admin
message (a refusal says why, never a 500) and is written to the admin's history
(``LogEntry``) when it changed something.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from pai_agents.agent import InvalidAgentInput
from pai_threads.errors import PaiError
from pai_threads.services.operator import Operator

__all__ = [
    "REFUSALS",
    "change_url",
    "guarded",
    "may",
    "object_or_none",
    "operation",
    "operator_of",
    "operator_urls",
    "render_page",
    "to_changelist",
]

# What an operation refuses with: shown to the operator as an error message.
REFUSALS = (PaiError, InvalidAgentInput)


def may(request: HttpRequest, model: Any, action: str) -> bool:
    """Whether the user holds the model's built-in ``action`` permission (change, delete)."""
    opts = model._meta
    return bool(request.user.has_perm(f"{opts.app_label}.{action}_{opts.model_name}"))


def operator_of(request: HttpRequest) -> Operator:
    """The staff user, from the authenticated session (trusted), never from the form."""
    user: Any = request.user
    return Operator(user_id=str(user.pk), username=user.get_username())


def change_url(obj: Any) -> str:
    opts = obj._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[quote(obj.pk)])


def object_or_none(model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str) -> Any:
    return model_admin.get_object(request, unquote(object_id))


def operation(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    obj: Any,
    do: Callable[[], str],
    *,
    deleted: bool = False,
) -> bool:
    """Run ``do`` (returns the success message); log it, or show the refusal. True if done."""
    try:
        done = do()
    except REFUSALS as exc:
        messages.error(request, f"Refused: {exc}")
        return False
    if deleted:
        model_admin.log_deletions(request, [obj])  # type: ignore[arg-type]
    else:
        model_admin.log_change(request, obj, done)
    messages.success(request, done)
    return True


def render_page(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    obj: Any,
    *,
    title: str,
    facts: Sequence[tuple[str, Any]] = (),
    fields: Sequence[dict[str, Any]] = (),
    buttons: Sequence[tuple[str, str, str]] = (("confirm", "yes", "Confirm"),),
    warning: str = "",
) -> HttpResponse:
    """A confirmation page or small form (``fields``: name, label, kind, value)."""
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "original": obj,
        "title": title,
        "facts": facts,
        "fields": fields,
        "buttons": buttons,
        "warning": warning,
        "back": change_url(obj),
    }
    return TemplateResponse(request, "admin/pai_threads/operate.html", context)


def operator_urls(
    model_admin: admin.ModelAdmin, views: Sequence[tuple[str, str, Callable[..., HttpResponse]]]
) -> list[URLPattern]:
    """``(route, name, view)`` as admin URLs named ``admin:<app>_<model>_<name>``."""
    info = model_admin.opts.app_label, model_admin.opts.model_name
    return [
        path(route, model_admin.admin_site.admin_view(view), name="{}_{}_{}".format(*info, name))
        for route, name, view in views
    ]


def guarded(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    object_id: str,
    permission: tuple[Any, str],
) -> Any:
    """The object, or PermissionDenied / None (a message says it is gone)."""
    if not may(request, *permission):
        raise PermissionDenied
    obj = object_or_none(model_admin, request, object_id)
    if obj is None:
        messages.error(request, f"{model_admin.opts.verbose_name} {object_id!r} not found.")
    return obj


def to_changelist(model_admin: admin.ModelAdmin) -> HttpResponseRedirect:
    opts = model_admin.opts
    return HttpResponseRedirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
