"""The Redis replay buffer: one stream and one hash per thread, shared by every process.

Used when executors run in other processes (Celery workers) than the websocket consumers.
Appends are one Lua script per batch, so numbering, storing, moving the active-generation
pointer, trimming and refreshing the TTL are atomic: two publishers of one thread (a worker
and a web process renaming the thread) can never interleave numbers and stream ids.
Keys: ``pai:rt:{<thread>}:meta`` (hash: ``seq``, ``gmsg``, ``grun``, ``gstart``) and
``pai:rt:{<thread>}:log`` (stream, entry id ``<seq>-0``, fields ``s`` and ``e``).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Sequence
from typing import Any

from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis

from pai_agents.engine.events import RunEvent
from pai_agents.json import prebuilt_dumps
from pai_threads.realtime.buffers.base import (
    ActiveGeneration,
    LogState,
    generation_mark,
    with_seq,
)
from pai_threads.realtime.buffers.hiredis_packing import pack_with_hiredis
from pai_threads.realtime.buffers.script_batch import OnReply, ScriptBatch
from pai_threads.realtime.conf import realtime_setting, redis_url
from pai_threads.realtime.notify import MESSAGE_TYPE
from pai_threads.realtime.redis_layer import (
    FAN_OUT_LUA,
    RedisChannelLayer,
    log_over_capacity,
    registered_script,
)

__all__ = ["RedisReplayBuffer", "numbered", "report_capacity"]

# The replay entry of an event (one per token's event): compact, its encoder made once.
_compact_json = prebuilt_dumps(separators=(",", ":"))

# Seqs exceed Lua's %.14g number formatting: always format them with %d.
_BASE = """
local function base()
  local t = redis.call('TIME')
  return (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) * 1000
end
"""

# Numbers, stores and trims a batch; sets ``first``, its first number (a Lua number).
# KEYS[km], KEYS[km + 1]: the thread's keys; ARGV[ao]: "<ttl ms> <retained> <n>"; then per
# event its generation mark ("" or kind, id and id, NUL-separated) and its JSON.
_APPEND_BATCH = """
local meta, log = KEYS[km], KEYS[km + 1]
local ttl, retained, n = string.match(ARGV[ao], '^(%d+) (%d+) (%d+)$')
ttl, retained, n = tonumber(ttl), tonumber(retained), tonumber(n)
local last = redis.call('HGET', meta, 'seq')
if last then last = tonumber(last) else last = base() end
local first = last + 1
for i = 0, n - 1 do
  local mark, body = ARGV[ao + 1 + i * 2], ARGV[ao + 2 + i * 2]
  local kind, a, b = '', '', ''
  if mark ~= '' then kind, a, b = string.match(mark, '^(%a+)%z([^%z]*)%z(.*)$') end
  last = last + 1
  local s = string.format('%d', last)
  redis.call('XADD', log, s .. '-0', 's', s, 'e', body)
  if kind == 'start' then
    redis.call('HSET', meta, 'gmsg', a, 'grun', b, 'gstart', s)
  elseif (kind == 'end' and redis.call('HGET', meta, 'gmsg') == a)
      or (kind == 'run' and redis.call('HGET', meta, 'grun') == a) then
    redis.call('HDEL', meta, 'gmsg', 'grun', 'gstart')
  end
end
redis.call('HSET', meta, 'seq', string.format('%d', last))
if redis.call('XLEN', log) > retained then
  local floor = last - retained + 1
  local gstart = redis.call('HGET', meta, 'gstart')
  if gstart and tonumber(gstart) < floor then floor = tonumber(gstart) end
  redis.call('XTRIM', log, 'MINID', string.format('%d', floor) .. '-0')
end
redis.call('PEXPIRE', meta, ttl)
redis.call('PEXPIRE', log, ttl)
"""

_APPEND = _BASE + "local km, ao = 1, 1" + _APPEND_BATCH + "return string.format('%d', first)"

# Numbers of the group message before the script writes the real ones over them: a
# msgpack uint64 (real numbers exceed 2**32, so they are uint64s too), never part of a
# msgpack string (0xcf 0xca is not UTF-8).
_PLACEHOLDER_SEQ = 0xCAFE << 48
_PLACEHOLDER = b"\xcf" + _PLACEHOLDER_SEQ.to_bytes(8, "big")

# Several threads' batches in one call (:class:`ScriptBatch`: one command per loop
# iteration, not one per batch, which redis-py sends and parses each in Python). Per batch:
# KEYS: the thread's two keys and the group's; ARGV: the append's arguments, the group
# message (ARGV[fan - 1]), numbered in place (its events' ``seq`` placeholders, in order,
# get the numbers just assigned), then the layer's group_send writes (ARGV[fan] .., as the
# layer's ``fan_out_args``). Replies: per batch, its first number, the member channels over
# capacity and the members.
_APPEND_AND_SEND = (
    _BASE
    + """
local replies, km, ao = {}, 1, 1
while ao <= #ARGV do
"""
    + _APPEND_BATCH
    + """
local fan = ao + 2 + 2 * n
local head, group, members, over = ARGV[fan - 1], KEYS[km + 2], nil, nil
local pieces, pos = {}, 1
for i = 0, n - 1 do
  local at = string.find(head, '"""
    + "".join(f"\\{byte}" for byte in _PLACEHOLDER)
    + """', pos, true)
  pieces[#pieces + 1] = string.sub(head, pos, at)
  pieces[#pieces + 1] = struct.pack('>I8', first + i)
  pos = at + 9
end
pieces[#pieces + 1] = string.sub(head, pos)
local body = table.concat(pieces)
"""
    + FAN_OUT_LUA
    + """
replies[#replies + 1] = {string.format('%d', first), over, #members}
km, ao = km + 3, fan + 3
end
return replies
"""
)

_STATE = (
    _BASE
    + """
local meta, log = KEYS[1], KEYS[2]
local last = redis.call('HGET', meta, 'seq')
if not last then
  last = string.format('%d', base())
  redis.call('HSET', meta, 'seq', last)
  redis.call('PEXPIRE', meta, tonumber(ARGV[1]))
end
local head = redis.call('XRANGE', log, '-', '+', 'COUNT', 1)
local first = ''
if head[1] then first = head[1][1] end
local g = redis.call('HMGET', meta, 'gmsg', 'grun', 'gstart')
return {last, first, g[1] or '', g[2] or '', g[3] or ''}
"""
)


def _keys(thread_id: str) -> list[str]:
    return [f"pai:rt:{{{thread_id}}}:meta", f"pai:rt:{{{thread_id}}}:log"]


def numbered(events: Sequence[RunEvent], reply: Any) -> list[RunEvent]:
    """``events`` with the numbers :meth:`RedisReplayBuffer.hand_over`'s script assigned
    them (its ``reply``)."""
    first = int(_text(reply[0]))
    return [with_seq(event, first + offset) for offset, event in enumerate(events)]


def report_capacity(reply: Any, group: str) -> None:
    """channels-redis' log line when member channels of ``group`` were full (the reply of
    :meth:`RedisReplayBuffer.hand_over`'s script says how many)."""
    _, over, members = reply
    if over:
        log_over_capacity(int(over), int(members), group)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisReplayBuffer:
    """redis-py asyncio clients are bound to an event loop: one client per loop.

    Each client's pool makes a call wait for a free connection (up to ``connection_wait``
    seconds) rather than fail: when the channel layer drops a fan-out (a process inbox over
    capacity), every consumer of the process fills its gap at the same moment, and with
    redis-py's default pool the reads beyond ``max_connections`` failed at once
    (``MaxConnectionsError``), which each consumer took for a buffer outage and answered
    with a resync (a snapshot and a replay per client, on an already busy server).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        max_connections: int = 100,
        connection_wait: float = 10.0,
    ) -> None:
        self._url = url or redis_url()
        self._max_connections = max_connections
        self._connection_wait = connection_wait
        if not self._url:
            raise ValueError("RedisReplayBuffer needs PAI['REALTIME_REDIS_URL'] or REDIS_URL")
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Redis] = (
            weakref.WeakKeyDictionary()
        )
        self._batches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ScriptBatch] = (
            weakref.WeakKeyDictionary()
        )

    def _client(self) -> Redis:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            pool = pack_with_hiredis(
                BlockingConnectionPool.from_url(
                    self._url, max_connections=self._max_connections, timeout=self._connection_wait
                )
            )
            client = self._clients[loop] = Redis.from_pool(pool)
        return client

    async def append(self, thread_id: str, events: Sequence[RunEvent]) -> list[RunEvent]:
        if not events:
            return []
        script = registered_script(self._client(), _APPEND)
        first = int(_text(await script(keys=_keys(thread_id), args=self._append_args(events))))
        return [with_seq(event, first + offset) for offset, event in enumerate(events)]

    def _append_args(self, events: Sequence[RunEvent]) -> list[Any]:
        ttl_ms = int(float(realtime_setting("REALTIME_REPLAY_TTL")) * 1000)
        retained = int(realtime_setting("REALTIME_RETAINED_EVENTS"))
        args: list[Any] = [f"{ttl_ms} {retained} {len(events)}"]
        for event in events:
            mark = generation_mark(event)
            args.append("\0".join([*mark, ""][:3]) if mark else "")
            args.append(_compact_json(event))
        return args

    async def aclose(self) -> None:
        """Close this loop's client (tests, shutdown): others close with their loops."""
        self._batches.pop(asyncio.get_running_loop(), None)
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    def shares_server(self, layer: RedisChannelLayer) -> bool:
        """Whether ``layer`` keeps its channels in this buffer's Redis database (one host):
        then :meth:`hand_over` can make both writes in one script."""
        if layer.ring_size != 1:
            return False
        pool = layer.create_pool(0)
        if type(pool) is not ConnectionPool:  # a sentinel pool: the server may change
            return False
        own = ConnectionPool.from_url(self._url).connection_kwargs
        theirs = pool.connection_kwargs
        return all(own.get(k) == theirs.get(k) for k in ("host", "port", "path", "db", "username"))

    def hand_over(
        self,
        thread_id: str,
        events: Sequence[RunEvent],
        layer: RedisChannelLayer,
        group: str,
        on_reply: OnReply | None = None,
    ) -> asyncio.Future[Any]:
        """:meth:`append`, then ``layer.group_send(group, {"type": MESSAGE_TYPE, "events":
        <the numbered events>})``, in one script, without waiting: the batch is queued
        behind every batch this loop handed over before (:class:`ScriptBatch`, which sends
        them together). The future is the script's reply (:func:`numbered` reads it);
        ``on_reply`` is told it (or the error) first, as :meth:`ScriptBatch.call` says.

        The group message is serialized here with placeholder numbers (msgpack uint64s,
        as real numbers are: they exceed 2**32), and the script writes the assigned ones
        over them, so receivers get exactly what ``group_send`` would have sent. Raises
        ``ValueError`` when the layer's configuration needs its own ``group_send``."""
        message = {"type": MESSAGE_TYPE, "events": [with_seq(e, _PLACEHOLDER_SEQ) for e in events]}
        group_key, head, fan_args = layer.fan_out_args(group, message)
        if head.count(_PLACEHOLDER) != len(events):
            raise ValueError("the group message's numbers could not be placed")
        args = [*self._append_args(events), head, *fan_args]
        loop = asyncio.get_running_loop()
        batch = self._batches.get(loop)
        if batch is None:
            client = self._client()
            batch = self._batches[loop] = ScriptBatch(
                client, registered_script(client, _APPEND_AND_SEND)
            )
        return batch.call([*_keys(thread_id), group_key], args, on_reply)

    async def state(self, thread_id: str) -> LogState:
        ttl_ms = int(float(realtime_setting("REALTIME_REPLAY_TTL")) * 1000)
        script = registered_script(self._client(), _STATE)
        raw = await script(keys=_keys(thread_id), args=[ttl_ms])
        last, first, gmsg, grun, gstart = (_text(v) for v in raw)
        generation = None
        if gmsg:
            generation = ActiveGeneration(message_id=gmsg, run_id=grun, start_seq=int(gstart))
        return LogState(
            first_seq=int(first.split("-")[0]) if first else int(last) + 1,
            last_seq=int(last),
            generation=generation,
        )

    async def read(self, thread_id: str, *, after: int, upto: int) -> list[RunEvent]:
        if upto <= after:
            return []
        entries = await self._client().xrange(_keys(thread_id)[1], f"{after + 1}-0", f"{upto}-0")
        events: list[RunEvent] = []
        for _entry_id, fields in entries or ():
            values = {_text(k): _text(v) for k, v in (fields or {}).items()}
            events.append(with_seq(json.loads(values["e"]), int(values["s"])))
        return events
