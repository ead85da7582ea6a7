"""Fixtures for tests that go through Django: identities, the API client, waiting on runs."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from django.test import Client

from pai_threads.identity import Identity
from pai_threads.models import Run


@pytest.fixture
def alice() -> Identity:
    return Identity(scope_key="user:alice", data={"userId": "alice"})


@pytest.fixture
def bob() -> Identity:
    return Identity(scope_key="user:bob", data={"userId": "bob"})


@pytest.fixture
def wait_for_run() -> Callable[..., Run]:
    """Poll a run until it leaves the active states (runs execute on other threads/processes)."""

    def wait(run_id: str, timeout: float = 30.0) -> Run:
        deadline = time.monotonic() + timeout
        while True:
            run = Run.objects.get(id=run_id)
            if run.status not in Run.ACTIVE:
                return run
            if time.monotonic() > deadline:
                raise AssertionError(f"run {run_id} still {run.status} after {timeout}s")
            time.sleep(0.05)

    return wait


@pytest.fixture
def operator() -> Client:
    """A logged-in superuser: the operator console's every page and action."""
    from django.contrib.auth.models import User

    User.objects.create_superuser("op", "op@example.com", "pw")
    client = Client()
    client.login(username="op", password="pw")
    return client


@pytest.fixture
def api_client() -> Client:
    """A browser-like client: session cookie identity, CSRF enforced like in production."""
    return Client(enforce_csrf_checks=True)


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every realtime event published (recorded instead of fanned out), in order."""
    events: list[dict[str, Any]] = []

    def record(thread_id: str, batch: Sequence[dict[str, Any]]) -> list[Any]:
        events.extend(batch)
        return list(batch)

    # In process, delivery.publish and every run's inline flush both end here.
    monkeypatch.setattr("pai_threads.realtime.delivery.publish_inline", record)
    return events


@pytest.fixture
def queued_w1_run() -> str:
    """A queued run of the W1 benchmark agent (a tool round trip), sent with dispatch off:
    the test executes it (or claims it) itself."""
    from django.conf import settings
    from django.test import override_settings

    from benchmarks.agents import w1_agent
    from benchmarks.workloads.common import USER_MESSAGE
    from pai_threads import services

    identity = Identity(scope_key="queued-w1", data={})
    with override_settings(PAI={**settings.PAI, "AGENTS": [w1_agent]}):
        thread = services.create_thread(identity, agent=w1_agent.name)
        sent = services.send(identity, thread.id, USER_MESSAGE, dispatch=False)
    assert sent.run is not None
    return sent.run.id
