"""The operator console: read-only views of runtime rows, and the cancel action."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


def test_operators_see_runtime_rows_read_only_and_can_cancel_runs(operator: Client) -> None:
    identity = Identity(scope_key="user:dora")
    thread = services.create_thread(identity, title="Ops")
    sent = services.send(
        identity, thread.id, {"parts": [{"type": "text", "text": "hi"}]}, dispatch=False
    )

    for url in (
        "/admin/pai_threads/thread/",
        reverse("admin:pai_threads_thread_change", args=[quote(thread.id)]),
        "/admin/pai_threads/run/",
        # Admin URLs escape "_XX" sequences in ids: build them the way the admin does.
        reverse("admin:pai_threads_run_change", args=[quote(sent.run.id)]),
        "/admin/pai_threads/message/",
        "/admin/pai_threads/queueitem/",
        "/admin/pai_threads/pendingaction/",
    ):
        assert operator.get(url).status_code == 200, url
    assert operator.get("/admin/pai_threads/run/add/").status_code == 403

    response = operator.post(
        "/admin/pai_threads/run/",
        {"action": "cancel_runs", "_selected_action": [sent.run.id]},
    )
    assert response.status_code == 302
    assert Run.objects.get(id=sent.run.id).status == "cancelled"


def test_the_console_is_closed_to_anonymous_visitors() -> None:
    response = Client().get("/admin/pai_threads/run/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
