"""Hiding and showing messages in the transcript or the model's context, as an operator.

Each change is the ``visibility`` history rewrite (:func:`~pai_threads.services.update_visibility`,
LC-059): one per thread, under its lock, with the agent's ``prepare_history_rewrite`` and
``history_rewritten`` hooks, and live clients get the new thread head. Refused while a run
holds the thread's lease. Needs the built-in "change message" permission.
"""

from __future__ import annotations

from collections import defaultdict

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from pai_threads import services
from pai_threads.admin.operate import REFUSALS
from pai_threads.models import Message
from pai_threads.services.operator import operator_identity

__all__ = ["VisibilityActions"]


class VisibilityActions(admin.ModelAdmin):
    """The visibility actions of :class:`~pai_threads.admin.MessageAdmin`'s list."""

    actions = ["hide_from_transcript", "show_in_transcript", "hide_from_context", "show_in_context"]

    @admin.action(
        description="Hide the selected messages from the transcript", permissions=["operate"]
    )
    def hide_from_transcript(self, request: HttpRequest, queryset: QuerySet[Message]) -> None:
        self._rewrite(request, queryset, "transcript", False)

    @admin.action(
        description="Show the selected messages in the transcript", permissions=["operate"]
    )
    def show_in_transcript(self, request: HttpRequest, queryset: QuerySet[Message]) -> None:
        self._rewrite(request, queryset, "transcript", True)

    @admin.action(
        description="Hide the selected messages from the model's context", permissions=["operate"]
    )
    def hide_from_context(self, request: HttpRequest, queryset: QuerySet[Message]) -> None:
        self._rewrite(request, queryset, "context", False)

    @admin.action(
        description="Show the selected messages in the model's context", permissions=["operate"]
    )
    def show_in_context(self, request: HttpRequest, queryset: QuerySet[Message]) -> None:
        self._rewrite(request, queryset, "context", True)

    def _rewrite(
        self, request: HttpRequest, queryset: QuerySet[Message], where: str, shown: bool
    ) -> None:
        by_thread: dict[str, list[Message]] = defaultdict(list)
        for message in queryset.select_related("thread"):
            by_thread[message.thread_id].append(message)
        verb = ("shown in" if shown else "hidden from") + f" the {where}"
        for rows in by_thread.values():
            thread = rows[0].thread
            changes = {row.message_id: {where: shown} for row in rows}
            try:
                done = services.update_visibility(operator_identity(thread), thread.id, changes)
            except REFUSALS as exc:
                messages.error(request, f"Thread {thread.id} refused: {exc}")
                continue
            if done is None:
                messages.info(request, f"Thread {thread.id}: nothing to change.")
                continue
            changed = {change.message_id for change in done.changes}
            for row in rows:
                if row.message_id in changed:
                    self.log_change(request, row, f"{verb} (visibility rewrite)")
            messages.success(
                request,
                f"Thread {thread.id}: {len(changed)} message(s) {verb}"
                f" (version {done.after_version}).",
            )
