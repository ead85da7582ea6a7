"""Settings of the servers the websocket error, fuzz and fault tests start.

The integration test settings (:mod:`tests.support.settings`) plus the agents of
:mod:`tests.support.ws_agents`. With ``PAI_TEST_REALTIME_REDIS_URL``, the channel layer is
PAI's :class:`pai_threads.realtime.redis_layer.RedisChannelLayer` (what docs/realtime.md
recommends), or channels-redis' own with ``PAI_TEST_PLAIN_CHANNELS_REDIS=1``.
"""

from __future__ import annotations

import os

from tests.support.settings import *  # noqa: F403
from tests.support.settings import CHANNEL_LAYERS, PAI

PAI = {
    **PAI,
    "AGENTS": [*PAI["AGENTS"], "tests.support.ws_agents.echo", "tests.support.ws_agents.steady"],
}

_layer = CHANNEL_LAYERS["default"]
_REDIS_BACKENDS = (
    "channels_redis.core.RedisChannelLayer",
    "pai_threads.realtime.redis_layer.RedisChannelLayer",
)
if _layer["BACKEND"] in _REDIS_BACKENDS:
    if os.environ.get("PAI_TEST_PLAIN_CHANNELS_REDIS"):
        # channels-redis' own layer with a socket timeout below its 5 s blocking pop: every
        # idle receive times out (the race redis-py's 5 s default loses only now and then).
        hosts = [{"address": h, "socket_timeout": 2} for h in _layer["CONFIG"]["hosts"]]
        CHANNEL_LAYERS = {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {**_layer["CONFIG"], "hosts": hosts},
            }
        }
    else:
        CHANNEL_LAYERS = {
            "default": {**_layer, "BACKEND": "pai_threads.realtime.redis_layer.RedisChannelLayer"}
        }
