"""Settings of the worker processes the durable-run acceptance tests start.

The demo site plus the agents of :mod:`tests.support.durable_agents`, the Celery executor when
``REDIS_URL`` is set (the in-process one otherwise), and a short lease so that takeovers after
a crash or a pause happen within seconds (``PAI_TEST_LEASE_SECONDS``, default 3).
"""

from __future__ import annotations

import os
from typing import Any

from pai_project.settings import *  # noqa: F403
from pai_project.settings import PAI as BASE_PAI
from pai_project.settings import REDIS_URL

DURABLE_AGENTS = [
    "tests.support.durable_agents.durable",
    "tests.support.durable_agents.approver",
    "tests.support.durable_agents.remote",
]

_pai: dict[str, Any] = {
    **BASE_PAI,
    "AGENTS": [*BASE_PAI["AGENTS"], *DURABLE_AGENTS],
    "EXECUTOR": "celery" if REDIS_URL else "thread",
    "LEASE_SECONDS": float(os.environ.get("PAI_TEST_LEASE_SECONDS", "3")),
}
PAI = _pai
