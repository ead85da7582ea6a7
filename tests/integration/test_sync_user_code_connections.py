"""Sync user code (a tool, a hook) that uses the ORM from a worker thread ends like a request.

``pai_threads`` installs ``run_user_sync`` as ``pai_agents``' sync runner: each call starts and
ends with ``close_old_connections``, so a worker thread never keeps a connection that a
database restart broke, nor one that outlives the thread (Python 3.13 warns about those).
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.db import connection, connections

from pai_agents.sync_calls import run_sync
from pai_threads.models import Thread

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_sync_callable_using_the_orm_leaves_no_open_connection_in_its_thread() -> None:
    seen: dict[str, object] = {}

    def user_tool() -> int:
        seen["thread"] = threading.get_ident()
        count = Thread.objects.count()
        seen["open_inside"] = connection.connection is not None
        seen["conn"] = connections["default"]  # this thread's wrapper, not the proxy
        return count

    assert asyncio.run(run_sync(user_tool)) == 0
    assert seen["thread"] != threading.get_ident()
    assert seen["open_inside"] is True
    # The worker thread's connection was closed when the call ended (CONN_MAX_AGE = 0).
    assert seen["conn"].connection is None  # type: ignore[attr-defined]
