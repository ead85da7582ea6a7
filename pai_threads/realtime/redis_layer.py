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
:meth:`RedisChannelLayer.fan_out_args` lets the Redis replay buffer make those writes in
its own append script instead (one round trip per published batch, see
:mod:`pai_threads.realtime.buffers.redis`).

Receiving on this process's channels (``new_channel``'s) goes through
:class:`~pai_threads.realtime.redis_receive.ProcessReceiver`: one read loop per process pops
every queued message at once and hands each to its consumer, instead of four round trips
and two tasks per message (see that module for the delivery guarantees).
"""

from __future__ import annotations

import logging
import random
import time
import weakref
from typing import Any

import msgpack  # type: ignore[import-untyped]
from channels_redis.core import RedisChannelLayer as ChannelsRedisChannelLayer
from channels_redis.serializers import MsgPackSerializer
from channels_redis.utils import decode_hosts

from pai_threads.realtime.redis_receive import ProcessReceiver, Receiver

__all__ = [
    "DEFAULT_CAPACITY",
    "FAN_OUT_LUA",
    "SOCKET_TIMEOUT_MARGIN",
    "RedisChannelLayer",
    "registered_script",
]

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

# group_send's writes inside another script: expects the group key in the local ``group``,
# the serialized message up to its ``__asgi_channel__`` value in ``body`` and ARGV[fan] ..
# ARGV[fan + 2] as :meth:`RedisChannelLayer.fan_out_args` returns them; sets the locals
# ``members`` and ``over`` (channels over capacity), which the script declares. A member
# channel's key is the prefix and its non-local name (up to its "!"); each key gets one
# message naming its member channels.
FAN_OUT_LUA = """
local now, gcut, mcut, expiry, capacity = string.match(
  ARGV[fan], '^(%S+) (%S+) (%S+) (%S+) (%S+)$')
capacity = tonumber(capacity)
local kprefix, rprefix = ARGV[fan + 1], ARGV[fan + 2]
redis.call('ZREMRANGEBYSCORE', group, 0, gcut)
members = redis.call('ZRANGE', group, 0, -1)
local keys, names = {}, {}
for _, channel in ipairs(members) do
  local bang = string.find(channel, '!', 1, true)
  local key = kprefix .. (bang and string.sub(channel, 1, bang) or channel)
  if not names[key] then names[key] = {}; keys[#keys + 1] = key end
  table.insert(names[key], channel)
end
over = 0
for _, key in ipairs(keys) do
  redis.call('ZREMRANGEBYSCORE', key, 0, mcut)
  if redis.call('ZCOUNT', key, '-inf', '+inf') < capacity then
    redis.call('ZADD', key, now, rprefix .. body .. cmsgpack.pack(names[key]))
    redis.call('EXPIRE', key, expiry)
  else
    over = over + 1
  end
end
"""

# One packer for every call (C code that keeps the GIL while it packs; packb makes one per
# call): the message of every published batch is packed here.
_packer = msgpack.Packer()
_CHANNEL_KEY = msgpack.packb("__asgi_channel__")


def _map_up_to_channel(message: dict[str, Any]) -> bytes:
    """``message`` as msgpack with one more entry, ``__asgi_channel__``, whose key ends the
    bytes (each member channel key's message appends its own value): the bytes
    channels-redis' serializer would write up to that value."""
    entries = len(message)
    packed: bytes = _packer.pack(message)
    # The map's header (fixmap, map16 or map32 by its entries) replaced by one for one more.
    header = 1 if entries < 16 else 3 if entries < 2**16 else 5
    widened: bytes = _packer.pack_map_header(entries + 1)
    return widened + packed[header:] + _CHANNEL_KEY


# Each client's scripts: redis-py's ``register_script`` hashes the text on every call (a
# third of a published batch's own CPU before they were kept).
_scripts: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def registered_script(client: Any, text: str) -> Any:
    """``client.register_script(text)``, made once per client (it runs by ``EVALSHA`` and
    loads itself again after a ``NOSCRIPT``)."""
    known = _scripts.get(client)
    if known is None:
        known = _scripts[client] = {}
    script = known.get(text)
    if script is None:
        script = known[text] = client.register_script(text)
    return script


# Seconds a blocking pop's reply may take beyond its own timeout before the read gives up.
SOCKET_TIMEOUT_MARGIN = 10.0


# channels-redis keeps all of a process's channels in one key, whose capacity (default 100)
# is thus shared by every websocket of the process: 200 streams fill it in ~12 ms of delay.
DEFAULT_CAPACITY = 2_000


class RedisChannelLayer(ChannelsRedisChannelLayer):
    """:class:`channels_redis.core.RedisChannelLayer`, safe with redis-py's 5 s default.

    ``capacity`` defaults to :data:`DEFAULT_CAPACITY`, not channels-redis' 100: a process's
    channels share one Redis key and its capacity, so with the stock value a web process
    serving 200 streams dropped fan-outs whenever its loop fell a few milliseconds behind,
    and every consumer then refilled its gap from the replay buffer at once (measured in
    the W5 benchmark, docs/benchmarks.md). Give ``capacity`` in ``CONFIG`` to choose."""

    def __init__(self, hosts: Any = None, **kwargs: Any) -> None:
        kwargs.setdefault("capacity", DEFAULT_CAPACITY)
        super().__init__(hosts=hosts, **kwargs)
        timeout = self.brpop_timeout + SOCKET_TIMEOUT_MARGIN
        self.hosts = [{"socket_timeout": timeout, **host} for host in decode_hosts(hosts)]
        self.process_receivers: dict[str, ProcessReceiver] = {}

    async def receive(self, channel: str) -> dict[str, Any]:
        """The next message of ``channel``: this process's channels through the process's
        read loop, any other (shared) channel as channels-redis receives it."""
        if "!" not in channel:
            message: dict[str, Any] = await super().receive(channel)
            return message
        assert self.require_valid_channel_name(channel)
        return await self._process_receiver(channel).receive(channel)

    def attach(self, channel: str, receiver: Receiver) -> None:
        """Offer ``pai.events`` batches for this process's ``channel`` to ``receiver``
        first (see :mod:`pai_threads.realtime.redis_receive`)."""
        self._process_receiver(channel).attach(channel, receiver)

    def detach(self, channel: str) -> None:
        self._process_receiver(channel).detach(channel)

    def _process_receiver(self, channel: str) -> ProcessReceiver:
        real_channel = self.non_local_name(channel)
        assert real_channel.endswith(self.client_prefix + "!"), "Wrong client prefix"
        receiver = self.process_receivers.get(real_channel)
        if receiver is None:
            receiver = self.process_receivers[real_channel] = ProcessReceiver(self, real_channel)
        return receiver

    def fan_out_args(self, group: str, message: dict[str, Any]) -> tuple[bytes, bytes, list[Any]]:
        """What :data:`FAN_OUT_LUA` needs to send ``message`` to ``group`` as
        :meth:`group_send` would: the group's key, the message serialized up to its
        ``__asgi_channel__`` value (that key last, its value per channel key), and the ARGV.

        Raises ``ValueError`` when a script cannot write what channels-redis would: several
        hosts (members on other servers), encrypted or non-msgpack messages, per-channel
        capacities."""
        if self.ring_size != 1 or self.channel_capacity:
            raise ValueError("the fan-out script needs one host and one channel capacity")
        serializer = self._serializer
        if type(serializer) is not MsgPackSerializer or serializer.crypter is not None:
            raise ValueError("the fan-out script writes plain msgpack messages only")
        assert self.require_valid_group_name(group), "Group name not valid"
        assert "__asgi_channel__" not in message
        body = _map_up_to_channel(message)
        length = serializer.random_prefix_length
        prefix = random.getrandbits(8 * length).to_bytes(length, "big") if length else b""
        now = time.time()
        numbers = (now, int(now) - self.group_expiry, int(now) - int(self.expiry))
        limits = f"{numbers[0]!r} {numbers[1]} {numbers[2]} {self.expiry} {self.capacity}"
        return self._group_key(group), body, [limits, self.prefix, prefix]

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
            script = registered_script(client, _GROUP_SEND)
            over = await script(keys=channel_keys, args=args)
            if over:
                log_over_capacity(over, len(channel_names), group)


def log_over_capacity(over: int, members: int, group: str) -> None:
    """channels-redis' message for a group send some member channels missed."""
    logger.info("%s of %s channels over capacity in group %s", over, members, group)
