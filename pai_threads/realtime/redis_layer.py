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

Its ``group_send`` (the realtime fan-out of every published batch, i.e. of nearly every
token delta of a paced model) makes the same writes as channels-redis' in two round trips
instead of four: the group's expiry and member read in one pipeline, then per host one
registered script (``EVALSHA``, not the script's text each time) that drops a member
channel's expired messages and adds the message unless the channel is full. Those Redis
round trips were most of a delta's CPU in the Celery + Redis arrangement (issue 16, W5).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from channels_redis.core import RedisChannelLayer as ChannelsRedisChannelLayer
from channels_redis.utils import decode_hosts

__all__ = ["SOCKET_TIMEOUT_MARGIN", "RedisChannelLayer"]

logger = logging.getLogger("channels_redis.core")  # the message channels-redis logs

# KEYS: member channel keys; ARGV: their messages, their capacities, now, expiry, cutoff.
_GROUP_SEND = """
local n = #KEYS
local now, expiry, cutoff = ARGV[2 * n + 1], ARGV[2 * n + 2], ARGV[2 * n + 3]
local over_capacity = 0
for i = 1, n do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, cutoff)
    if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[i + n]) then
        redis.call('ZADD', KEYS[i], now, ARGV[i])
        redis.call('EXPIRE', KEYS[i], expiry)
    else
        over_capacity = over_capacity + 1
    end
end
return over_capacity
"""

# Seconds a blocking pop's reply may take beyond its own timeout before the read gives up.
SOCKET_TIMEOUT_MARGIN = 10.0


class RedisChannelLayer(ChannelsRedisChannelLayer):
    """:class:`channels_redis.core.RedisChannelLayer`, safe with redis-py's 5 s default."""

    def __init__(self, hosts: Any = None, **kwargs: Any) -> None:
        super().__init__(hosts=hosts, **kwargs)
        timeout = self.brpop_timeout + SOCKET_TIMEOUT_MARGIN
        self.hosts = [{"socket_timeout": timeout, **host} for host in decode_hosts(hosts)]

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """channels-redis' ``group_send`` (same keys, expiry, capacity and messages) in two
        round trips."""
        assert self.require_valid_group_name(group), "Group name not valid"
        key = self._group_key(group)
        connection = self.connection(self.consistent_hash(group))
        pipe = connection.pipeline(transaction=False)
        pipe.zremrangebyscore(key, min=0, max=int(time.time()) - self.group_expiry)
        pipe.zrange(key, 0, -1)
        _, members = await pipe.execute()
        channel_names = [member.decode("utf8") for member in members]
        by_connection, messages, capacities = self._map_channel_keys_to_connection(
            channel_names, message
        )
        for index, channel_keys in by_connection.items():
            client = self.connection(index)
            args: list[Any] = [messages[k] for k in channel_keys]
            args += [capacities[k] for k in channel_keys]
            args += [time.time(), self.expiry, int(time.time()) - int(self.expiry)]
            script = client.register_script(_GROUP_SEND)
            over = await script(keys=channel_keys, args=args)
            if over:
                logger.info(
                    "%s of %s channels over capacity in group %s", over, len(channel_names), group
                )
