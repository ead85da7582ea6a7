"""Run attempts in the console: who claimed a run, with which lease, and how each claim ended.

The run page shows them as one timeline with the steps each attempt committed (a step
records its attempt); the attempt list is read-only like every runtime row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.contrib import admin
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from pai_threads.admin.base import ReadOnlyAdmin, ReadOnlyInline
from pai_threads.admin.steps import render_timeline
from pai_threads.models import RunAttempt, Step

__all__ = ["RunAttemptAdmin", "RunAttemptInline", "attempt_timeline", "how_started"]

_LOST = (RunAttempt.End.LEASE_LOST, RunAttempt.End.TAKEN_OVER)


def how_started(attempt: RunAttempt, previous: RunAttempt | None) -> str:
    """Why this claim happened, read from the attempt before it."""
    if previous is None:
        return "first claim" if attempt.number <= 1 else "claim (earlier attempts unrecorded)"
    if previous.ended == RunAttempt.End.WAITING:
        return f"resumed after attempt {previous.number} waited"
    if previous.ended in _LOST or not previous.ended:
        return f"recovered: took over from attempt {previous.number}"
    return f"claimed again after attempt {previous.number} ({previous.ended})"


def _ending(attempt: RunAttempt) -> SafeString:
    if not attempt.ended:
        return mark_safe("<strong>open</strong> (holds the lease)")
    css = "pai-attempt-lost" if attempt.ended in _LOST else "pai-attempt-ended"
    return format_html(
        "<strong class='{}'>{}</strong> at {} · {}",
        css,
        attempt.get_ended_display(),
        attempt.ended_at.isoformat(timespec="seconds") if attempt.ended_at else "?",
        attempt.explanation() or "no reason recorded",
    )


def _attempt_block(
    attempt: RunAttempt, previous: RunAttempt | None, steps: Sequence[Step]
) -> SafeString:
    body = render_timeline(steps) if steps else None
    return format_html(
        "<section class='pai-step-block pai-attempt' id='attempt-{}'>"
        "<h3>attempt {} · {}</h3><dl>"
        "<dt>worker</dt><dd><code>{}</code> · lease token {}</dd>"
        "<dt>claimed</dt><dd>{}</dd><dt>ended</dt><dd>{}</dd></dl>{}</section>",
        attempt.number,
        attempt.number,
        how_started(attempt, previous),
        attempt.worker,
        attempt.lease_token,
        attempt.claimed_at.isoformat(timespec="seconds"),
        _ending(attempt),
        body or mark_safe("<p><em>no step committed by this attempt</em></p>"),
    )


def attempt_timeline(attempts: Iterable[RunAttempt], steps: Iterable[Step]) -> SafeString:
    """The run's attempts in order, each followed by the steps it committed; steps of an
    attempt without a record (runs from before the history existed) come last."""
    by_attempt: dict[int, list[Step]] = {}
    for step in steps:
        by_attempt.setdefault(step.attempt, []).append(step)
    blocks: list[tuple[SafeString]] = []
    previous: RunAttempt | None = None
    for attempt in attempts:
        blocks.append((_attempt_block(attempt, previous, by_attempt.pop(attempt.number, [])),))
        previous = attempt
    for number in sorted(by_attempt):
        rows = render_timeline(by_attempt[number])
        blocks.append((format_html("<h3>attempt {} (no record)</h3>{}", number, rows),))
    if not blocks:
        return mark_safe("<em>not claimed yet</em>")
    return format_html_join("", "{}", blocks)


class RunAttemptInline(ReadOnlyInline):
    model = RunAttempt
    fields = ("number", "worker", "lease_token", "claimed_at", "ended", "ended_at", "reason")
    readonly_fields = fields
    ordering = ("number",)
    show_change_link = False


@admin.register(RunAttempt)
class RunAttemptAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "run", "worker", "lease_token", "ended", "claimed_at", "ended_at")
    list_filter = ("ended", "claimed_at")
    search_fields = ("run__id", "run__thread__id", "worker")
    list_select_related = ("run",)
    date_hierarchy = "claimed_at"
    public_fields = (
        "run",
        "number",
        "worker",
        "lease_token",
        "claimed_at",
        "ended",
        "ended_at",
        "reason",
    )
