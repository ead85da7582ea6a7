"""Operator actions on runs: cancel and recover, from the list or one run's page.

Cancel is :func:`~pai_threads.services.cancel_run` in the run's own partition (a waiting
run's pending actions are cancelled and its tool calls settled, hooks observe the end,
clients get the status); recover re-dispatches a run nobody executes, as the sweeper does.
Both need the built-in "change run" permission and are written to the admin's history.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern

from pai_threads import services
from pai_threads.admin.operate import (
    REFUSALS,
    change_url,
    guarded,
    operation,
    operator_urls,
    render_page,
    to_changelist,
)
from pai_threads.errors import ActionConflict
from pai_threads.identity import Identity
from pai_threads.models import Run
from pai_threads.services.operator import recover_run

__all__ = ["RunOperations"]


def _cancel(run: Run) -> str:
    if not run.is_active:
        raise ActionConflict(f"the run has ended ({run.status}): nothing to cancel")
    done = services.cancel_run(Identity(scope_key=run.scope_key), run.id)
    if done.status == Run.Status.CANCELLED:
        return f"Run {run.id} cancelled."
    return f"Cancel requested for run {run.id} ({done.status}): it ends cancelled shortly."


def _recover(run: Run) -> str:
    refused = recover_run(run.id)
    if refused:
        raise ActionConflict(refused)
    return f"Run {run.id} re-dispatched."


class RunOperations(admin.ModelAdmin):
    """The operator actions of :class:`~pai_threads.admin.RunAdmin`."""

    actions = ["cancel_runs", "recover_runs"]

    def get_urls(self) -> list[URLPattern]:
        return [
            *operator_urls(
                self,
                [
                    ("<path:object_id>/cancel/", "cancel", self.cancel_view),
                    ("<path:object_id>/recover/", "recover", self.recover_view),
                ],
            ),
            *super().get_urls(),
        ]

    @admin.action(description="Cancel the selected runs", permissions=["operate"])
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._each(request, queryset, _cancel)

    @admin.action(description="Recover the selected stalled runs", permissions=["operate"])
    def recover_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._each(request, queryset, _recover)

    def _each(
        self, request: HttpRequest, queryset: QuerySet[Run], act: Callable[[Run], str]
    ) -> None:
        for run in queryset:
            try:
                done = act(run)
            except REFUSALS as exc:
                messages.error(request, f"Run {run.id} refused: {exc}")
                continue
            self.log_change(request, run, done)
            messages.success(request, done)

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._page(request, object_id, "Cancel run", _cancel)

    def recover_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._page(request, object_id, "Recover run", _recover)

    def _page(
        self, request: HttpRequest, object_id: str, title: str, act: Callable[[Run], str]
    ) -> HttpResponse:
        run = guarded(self, request, object_id, (Run, "change"))
        if run is None:
            return to_changelist(self)
        if request.method == "POST":
            operation(self, request, run, lambda: act(run))
            return HttpResponseRedirect(change_url(run))
        facts = [("status", run.status), ("lease until", run.lease_expires_at or "—")]
        return render_page(self, request, run, title=title, facts=facts)
