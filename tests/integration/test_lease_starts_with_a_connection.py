"""A lease counts from when its statement can run, not from before the wait for a connection.

Found under 200 concurrent sends on PostgreSQL: every pool connection was held by a send
waiting for the thread's row lock, the executor's claim computed its lease expiry, then
waited over 3 s for a connection, and started with a 3 s lease that had already run out;
its first write found the lease lost and the thread's 199 queued messages stalled until
recovery. The claim and the heartbeat now take the connection before reading the clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from pai_threads import services
from pai_threads.identity import Identity
from pai_threads.models import Run
from pai_threads.store.thread_store import ORMThreadStore

pytestmark = pytest.mark.django_db(transaction=True)

IDENTITY = Identity(scope_key="lease-start", data={})
WAIT = 1.2  # seconds the connection takes to arrive
LEASE = 1.0


@pytest.fixture
def slow_connection(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], None]]:
    """Use after setup: this thread's next connection arrives ``WAIT`` seconds late."""
    connect = connection.connect

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(WAIT)
        return connect(*args, **kwargs)

    def arm() -> None:
        connection.close()
        monkeypatch.setattr(connection, "connect", slow)

    yield arm
    monkeypatch.undo()


def _lease_left(run_id: str) -> float:
    run = Run.objects.get(pk=run_id)
    assert run.lease_expires_at is not None
    return (run.lease_expires_at - timezone.now()).total_seconds()


def _queued_run() -> str:
    thread = services.create_thread(IDENTITY)
    message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    result = services.send(IDENTITY, thread.id, message, dispatch=False)
    assert result.run is not None
    return result.run.id


def test_a_claim_that_waited_for_its_connection_holds_a_live_lease(
    slow_connection: Callable[[], None],
) -> None:
    run_id = _queued_run()
    slow_connection()
    ORMThreadStore().claim_run_sync(run_id, owner="test", lease_seconds=LEASE)
    assert _lease_left(run_id) > 0


def test_a_heartbeat_that_waited_for_its_connection_renews_from_then(
    slow_connection: Callable[[], None],
) -> None:
    run_id = _queued_run()
    store = ORMThreadStore()
    claimed = store.claim_run_sync(run_id, owner="test", lease_seconds=LEASE)
    slow_connection()
    store.heartbeat_sync(claimed.lease, lease_seconds=LEASE)
    assert _lease_left(run_id) > 0
