"""channels-redis' channel layer with a socket timeout that fits its blocking receive.

``channels_redis.core.RedisChannelLayer.receive`` waits in ``BZPOPMIN <channel> 5`` (its
``brpop_timeout``) and loops. redis-py 8 gives every connection a default 5 s
``socket_timeout``, so on an idle channel the client's read deadline and the server's reply
to the timed-out pop race; when the client loses, redis-py raises ``TimeoutError:
Timeout reading from <host>`` out of ``receive``, and Channels closes the websocket with
1011 (issue: "daphne closed websockets with 1011 about every 20 s"). A message the server
popped for that losing read is also gone (it never reached the backup queue).

This layer sets ``socket_timeout`` of every host to ``brpop_timeout + SOCKET_TIMEOUT_MARGIN``
unless the host configures one: the blocking pop always answers first, and a dead server is
still noticed. Use it as the ``BACKEND`` of a Redis ``CHANNEL_LAYERS`` entry:
``"pai_threads.realtime.redis_layer.RedisChannelLayer"`` (same ``CONFIG`` as channels-redis).
"""

from __future__ import annotations

from typing import Any

from channels_redis.core import RedisChannelLayer as ChannelsRedisChannelLayer
from channels_redis.utils import decode_hosts

__all__ = ["SOCKET_TIMEOUT_MARGIN", "RedisChannelLayer"]

# Seconds a blocking pop's reply may take beyond its own timeout before the read gives up.
SOCKET_TIMEOUT_MARGIN = 10.0


class RedisChannelLayer(ChannelsRedisChannelLayer):
    """:class:`channels_redis.core.RedisChannelLayer`, safe with redis-py's 5 s default."""

    def __init__(self, hosts: Any = None, **kwargs: Any) -> None:
        super().__init__(hosts=hosts, **kwargs)
        timeout = self.brpop_timeout + SOCKET_TIMEOUT_MARGIN
        self.hosts = [{"socket_timeout": timeout, **host} for host in decode_hosts(hosts)]
