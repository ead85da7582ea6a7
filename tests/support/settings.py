"""Settings of the servers integration and e2e tests start: the demo site plus test agents.

``PAI_TEST_CHANNEL_CAPACITY`` shrinks the in-memory channel layer's per-channel capacity so
that ``group_send`` drops messages, as channels-redis does under load; consumers must refill
from the replay buffer. ``PAI_TEST_REALTIME_REDIS_URL`` switches the channel layer and the
replay buffer to Redis (the executor stays in-process).
"""

from __future__ import annotations

import os

from pai_project.settings import *  # noqa: F403
from pai_project.settings import PAI

PAI = {
    **PAI,
    "AGENTS": [
        *PAI["AGENTS"],
        "tests.support.agents.slow",
        "tests.support.agents.toolbox",
        "tests.support.tool_data_agents.reporter",
        "tests.support.marker_agents.markers",
    ],
    "EXECUTOR": "thread",
    "REALTIME_RESYNC_SECONDS": float(os.environ.get("PAI_TEST_RESYNC_SECONDS", "0.5")),
}

_capacity = int(os.environ.get("PAI_TEST_CHANNEL_CAPACITY", "100"))
_redis = os.environ.get("PAI_TEST_REALTIME_REDIS_URL", "")
if _redis:
    PAI["REALTIME_REDIS_URL"] = _redis
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "pai_threads.realtime.redis_layer.RedisChannelLayer",
            "CONFIG": {"hosts": [_redis], "capacity": _capacity},
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "pai_threads.realtime.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": _capacity},
        }
    }
