"""Model steps in the console: what each step asked for, what it cost, what it streamed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib import admin
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from pai_threads.admin.base import ReadOnlyAdmin, ReadOnlyInline, pretty_json, tokens_line
from pai_threads.admin.parts import render_parts
from pai_threads.models import Step

__all__ = ["StepAdmin", "StepInline", "render_timeline", "request_summary"]

# Request settings whose names suggest credentials are never shown, whoever asks.
_SECRET_HINTS = ("header", "key", "token", "secret", "auth", "password", "cookie")


def _redacted(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {
        name: "•••" if any(hint in name.lower() for hint in _SECRET_HINTS) else value
        for name, value in settings.items()
    }


def request_summary(request: Mapping[str, Any]) -> dict[str, Any]:
    """The step's effective request as operators see it: model, tools, settings (redacted)."""
    summary: dict[str, Any] = {}
    for key in ("provider", "modelId", "messageCount", "toolChoice", "durationMs"):
        if key in request:
            summary[key] = request[key]
    tools = request.get("tools")
    if isinstance(tools, list):
        summary["tools"] = [
            tool.get("name", "?") if isinstance(tool, Mapping) else str(tool) for tool in tools
        ]
    settings = request.get("settings")
    if isinstance(settings, Mapping) and settings:
        summary["settings"] = _redacted(settings)
    for flag in ("synthetic", "aborted", "failed"):
        if request.get(flag) is True:
            summary[flag] = True
    return summary


def _duration(step: Step) -> str:
    seconds = (step.finished_at - step.started_at).total_seconds()
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def _step_block(step: Step) -> SafeString:
    parts = render_parts(step.message.parts) if step.message else mark_safe("")
    return format_html(
        "<section class='pai-step-block'><h3>step {} · attempt {} · {} · {}</h3>"
        "<dl><dt>request</dt><dd>{}</dd><dt>usage</dt><dd>{}</dd></dl>{}</section>",
        step.index,
        step.attempt,
        step.finish_reason or "no finish reason",
        _duration(step),
        pretty_json(request_summary(step.request)),
        pretty_json(step.usage),
        parts,
    )


def render_timeline(steps: Iterable[Step]) -> SafeString:
    """Each step of a run, in order, with its request, usage and streamed parts."""
    blocks = [(_step_block(step),) for step in steps]
    if not blocks:
        return mark_safe("<em>no steps yet</em>")
    return format_html_join("", "{}", blocks)


class StepInline(ReadOnlyInline):
    model = Step
    fields = ("index", "attempt", "finish_reason", "tokens", "started_at", "finished_at")
    readonly_fields = fields
    ordering = ("index",)

    @admin.display(description="tokens")
    def tokens(self, obj: Step) -> str:
        return tokens_line(obj.usage)


@admin.register(Step)
class StepAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "run", "index", "finish_reason", "attempt", "started_at")
    list_filter = ("finish_reason", "started_at")
    search_fields = ("run__id", "run__thread__id", "message__message_id")
    list_select_related = ("run",)
    public_fields = (
        "run",
        "index",
        "attempt",
        "finish_reason",
        "started_at",
        "finished_at",
        "detail",
    )

    @admin.display(description="step")
    def detail(self, obj: Step) -> SafeString:
        return _step_block(obj)
