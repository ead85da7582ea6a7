"""Settings of the servers and ``pai_chat`` processes of the golden tests (tests/golden).

The integration test settings plus the agents of :mod:`tests.support.golden_agents`, and a
few changes that make every recording deterministic: runs go through the
:class:`~tests.support.golden_executor.GatedExecutor` (released by the test, so a request's
own events always precede the run's; and no embedded sweeper: recovery is asked for
explicitly), SSE keep-alives come at once, the consumers' resync watchdog is effectively off
(it could deliver a command's events before the command's ``ack``), and the in-memory
channel layer never drops a batch.
"""

from __future__ import annotations

from typing import Any

from tests.support.settings import *  # noqa: F403
from tests.support.settings import PAI as BASE_PAI

GOLDEN_AGENTS = [
    "tests.support.golden_agents.golden_plain",
    "tests.support.golden_agents.golden_tools",
    "tests.support.golden_agents.golden_approval",
    "tests.support.golden_agents.golden_client",
    "tests.support.golden_agents.golden_hang",
    "tests.support.golden_agents.golden_crash",
    "tests.support.golden_agents.golden_lifecycle",
]

_pai: dict[str, Any] = {
    **BASE_PAI,
    "AGENTS": [*BASE_PAI["AGENTS"], *GOLDEN_AGENTS],
    "EXECUTOR": "tests.support.golden_executor.GatedExecutor",
    "REALTIME_RESYNC_SECONDS": 3600.0,
    # Daphne sends a response's headers with its first body bytes: an idle SSE stream
    # (its run still held) sends a keep-alive comment at once, so the test sees the headers,
    # which come after everything the request itself published.
    "REALTIME_SSE_KEEPALIVE_SECONDS": 0.1,
}
PAI = _pai

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "pai_threads.realtime.layers.InMemoryChannelLayer",
        "CONFIG": {"capacity": 100_000},
    }
}

# The crash scenario logs an operator into the admin: a fast hash for the test's user.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
