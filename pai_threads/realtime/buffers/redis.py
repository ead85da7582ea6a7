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

from redis.asyncio import Redis

from pai_agents.engine.events import RunEvent
from pai_threads.realtime.buffers.base import (
    ActiveGeneration,
    LogState,
    generation_mark,
    with_seq,
)
from pai_threads.realtime.conf import realtime_setting, redis_url

__all__ = ["RedisReplayBuffer"]

# Seqs exceed Lua's %.14g number formatting: always format them with %d.
_BASE = """
local function base()
  local t = redis.call('TIME')
  return (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) * 1000
end
"""

_APPEND = (
    _BASE
    + """
local meta, log = KEYS[1], KEYS[2]
local ttl, retained, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local last = redis.call('HGET', meta, 'seq')
if last then last = tonumber(last) else last = base() end
local first = last + 1
for i = 0, n - 1 do
  local kind, a, b, body = ARGV[4 + i * 4], ARGV[5 + i * 4], ARGV[6 + i * 4], ARGV[7 + i * 4]
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
return string.format('%d', first)
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


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisReplayBuffer:
    """redis-py asyncio clients are bound to an event loop: one client per loop."""

    def __init__(self, url: str | None = None) -> None:
        self._url = url or redis_url()
        if not self._url:
            raise ValueError("RedisReplayBuffer needs PAI['REALTIME_REDIS_URL'] or REDIS_URL")
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Redis] = (
            weakref.WeakKeyDictionary()
        )

    def _client(self) -> Redis:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = Redis.from_url(self._url)
        return client

    async def append(self, thread_id: str, events: Sequence[RunEvent]) -> list[RunEvent]:
        if not events:
            return []
        ttl_ms = int(float(realtime_setting("REALTIME_REPLAY_TTL")) * 1000)
        args: list[Any] = [ttl_ms, int(realtime_setting("REALTIME_RETAINED_EVENTS")), len(events)]
        for event in events:
            mark = generation_mark(event) or ("",)
            refs = [*mark[1:], "", ""][:2]
            args += [mark[0], *refs, json.dumps(event, separators=(",", ":"))]
        script = self._client().register_script(_APPEND)
        first = int(_text(await script(keys=_keys(thread_id), args=args)))
        return [with_seq(event, first + offset) for offset, event in enumerate(events)]

    async def state(self, thread_id: str) -> LogState:
        ttl_ms = int(float(realtime_setting("REALTIME_REPLAY_TTL")) * 1000)
        script = self._client().register_script(_STATE)
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
