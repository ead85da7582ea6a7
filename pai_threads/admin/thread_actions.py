"""Operator actions on a thread: rename, archive, trigger a run, delete, answer an action.

Each is a page (a confirmation or a small form) that calls the runtime operation the API
uses, in the thread's own partition (:func:`~pai_threads.services.operator_identity`).
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern

from pai_threads import services
from pai_threads.admin.operate import (
    change_url,
    guarded,
    operation,
    operator_of,
    operator_urls,
    render_page,
    to_changelist,
)
from pai_threads.errors import InvalidInput
from pai_threads.models import File, Message, PendingAction, QueueItem, Run, Step, Thread
from pai_threads.services.operator import (
    answer_as_operator,
    delete_as_operator,
    operator_identity,
)

__all__ = ["ThreadOperations"]


class ThreadOperations(admin.ModelAdmin):
    """The operator pages of :class:`~pai_threads.admin.ThreadAdmin`."""

    def get_urls(self) -> list[URLPattern]:
        return [
            *operator_urls(
                self,
                [
                    ("<path:object_id>/rename/", "rename", self.rename_view),
                    ("<path:object_id>/archive/", "archive", self.archive_view),
                    ("<path:object_id>/trigger/", "trigger", self.trigger_view),
                    ("<path:object_id>/remove/", "remove", self.remove_view),
                    (
                        "<path:object_id>/actions/<str:action_id>/answer/",
                        "answer",
                        self.answer_view,
                    ),
                ],
            ),
            *super().get_urls(),
        ]

    def rename_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        thread = guarded(self, request, object_id, (Thread, "change"))
        if thread is None:
            return to_changelist(self)
        if request.method == "POST":
            title = request.POST.get("title", "")
            identity = operator_identity(thread)

            def rename() -> str:
                renamed = services.rename_thread(identity, thread.id, title)
                return f"Renamed to “{renamed.title}”."

            if operation(self, request, thread, rename):
                return HttpResponseRedirect(change_url(thread))
        field = {"name": "title", "label": "Title", "kind": "text", "value": thread.title}
        return render_page(
            self,
            request,
            thread,
            title="Rename thread",
            fields=[field],
            buttons=[("save", "1", "Rename")],
        )

    def archive_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        thread = guarded(self, request, object_id, (Thread, "change"))
        if thread is None:
            return to_changelist(self)
        archive = not thread.archived
        if request.method == "POST":
            identity = operator_identity(thread)

            def toggle() -> str:
                services.set_archived(identity, thread.id, archive)
                return "Archived." if archive else "Restored from the archive."

            operation(self, request, thread, toggle)
            return HttpResponseRedirect(change_url(thread))
        verb = "Archive" if archive else "Unarchive"
        return render_page(
            self,
            request,
            thread,
            title=f"{verb} thread",
            facts=[("archived now", thread.archived)],
            buttons=[("confirm", "1", verb)],
        )

    def trigger_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        thread = guarded(self, request, object_id, (Thread, "change"))
        if thread is None:
            return to_changelist(self)
        if request.method == "POST":
            identity = operator_identity(thread)

            def start() -> str:
                run = services.trigger(identity, thread.id)
                return f"Run {run.id} started (initiator trigger)."

            operation(self, request, thread, start)
            return HttpResponseRedirect(change_url(thread))
        return render_page(
            self,
            request,
            thread,
            title="Trigger a run",
            facts=[("agent", thread.agent_name), ("scope", thread.scope_key)],
            buttons=[("confirm", "1", "Start a run")],
        )

    def remove_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        thread = guarded(self, request, object_id, (Thread, "delete"))
        if thread is None:
            return to_changelist(self)
        if request.method == "POST":

            def delete() -> str:
                cancelled = delete_as_operator(thread)
                first = f" after cancelling run(s) {', '.join(cancelled)}" if cancelled else ""
                return f"Deleted thread {thread.id}{first}."

            if operation(self, request, thread, delete, deleted=True):
                return to_changelist(self)
            return HttpResponseRedirect(change_url(thread))
        active = list(Run.objects.active().filter(thread=thread).values_list("id", flat=True))
        counts = [
            (model._meta.verbose_name_plural, model.objects.filter(**{lookup: thread}).count())
            for model, lookup in (
                (Run, "thread"),
                (Step, "run__thread"),
                (Message, "thread"),
                (PendingAction, "thread"),
                (QueueItem, "thread"),
                (File, "thread"),
            )
        ]
        warning = f"Active run(s) {', '.join(active)} will be cancelled first." if active else ""
        return render_page(
            self,
            request,
            thread,
            title="Delete thread",
            facts=[("deleted with it", ", ".join(f"{n} {name}" for name, n in counts))],
            warning=warning,
            buttons=[("confirm", "1", "Yes, delete it")],
        )

    def answer_view(self, request: HttpRequest, object_id: str, action_id: str) -> HttpResponse:
        thread = guarded(self, request, object_id, (PendingAction, "change"))
        if thread is None:
            return to_changelist(self)
        action_id = unquote(action_id)
        action = PendingAction.objects.filter(id=action_id, thread=thread).first()
        if action is None:
            messages.error(request, f"Refused: no pending action {action_id!r} on this thread.")
            return HttpResponseRedirect(change_url(thread))
        if request.method == "POST":
            operator = operator_of(request)

            def answer() -> str:
                response = _response(request.POST)
                done = answer_as_operator(operator, action.id, response, thread_id=thread.id)
                return f"Answered {done.kind} action {done.id} ({done.tool_name}) as an operator."

            operation(self, request, thread, answer)
            return HttpResponseRedirect(change_url(thread))
        return render_page(
            self,
            request,
            thread,
            title=f"Answer {action.kind} action: {action.tool_name}",
            facts=[
                ("action", action.id),
                ("run", f"{action.run_id} ({action.run.status})"),
                ("status", action.status),
                ("input", json.dumps(action.input, ensure_ascii=False)),
            ],
            fields=_answer_fields(action),
            buttons=_answer_buttons(action),
        )


def _answer_fields(action: PendingAction) -> list[dict[str, Any]]:
    if action.kind == PendingAction.Kind.APPROVAL:
        return [{"name": "reason", "label": "Reason (optional)", "kind": "text", "value": ""}]
    if action.kind == PendingAction.Kind.INPUT:  # a declared suspension (docs/suspensions.md)
        schema = json.dumps((action.request or {}).get("schema") or {}, ensure_ascii=False)
        return [
            {
                "name": "answer",
                "label": f"Answer to {(action.request or {}).get('suspension')!s} (JSON)",
                "kind": "textarea",
                "value": "",
                "help": f"Validated against the tool's declared model; its schema: {schema}",
            }
        ]
    return [
        {
            "name": "output",
            "label": "Output (JSON)",
            "kind": "textarea",
            "value": "",
            "help": "Validated against the tool's output like a client's answer.",
        },
        {"name": "errorText", "label": "or an error", "kind": "text", "value": ""},
    ]


def _answer_buttons(action: PendingAction) -> list[tuple[str, str, str]]:
    if action.kind == PendingAction.Kind.APPROVAL:
        return [("approved", "true", "Approve"), ("approved", "false", "Deny")]
    if action.kind == PendingAction.Kind.INPUT:
        return [("fulfil", "1", "Submit the answer")]
    return [("fulfil", "1", "Submit the result")]


def _response(post: Any) -> dict[str, Any]:
    """The answer from the form, shaped as the API takes it (validated by the service)."""
    if "approved" in post:
        value = post.get("approved")
        if value not in ("true", "false"):
            raise InvalidInput("approved must be true or false")
        reason = post.get("reason", "").strip()
        return {"approved": value == "true", **({"reason": reason} if reason else {})}
    if "answer" in post:
        try:
            return {"answer": json.loads(post.get("answer", ""))}
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"the answer is not JSON: {exc.msg}") from None
    error = post.get("errorText", "").strip()
    if error:
        return {"errorText": error}
    raw = post.get("output", "")
    if not raw.strip():
        raise InvalidInput("give an output (JSON) or an error")
    try:
        return {"output": json.loads(raw)}
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"the output is not JSON: {exc.msg}") from None
