"""Replay buffer backends, chosen by ``PAI["REALTIME_BUFFER"]`` (see :mod:`.base`)."""

from __future__ import annotations

from functools import cache

from django.utils.module_loading import import_string

from pai_threads.realtime.buffers.base import ActiveGeneration, LogState, ReplayBuffer
from pai_threads.realtime.conf import realtime_setting, redis_url

__all__ = ["ActiveGeneration", "LogState", "ReplayBuffer", "clear_cache", "get_buffer"]

_BUILTIN = {
    "memory": "pai_threads.realtime.buffers.memory.MemoryReplayBuffer",
    "redis": "pai_threads.realtime.buffers.redis.RedisReplayBuffer",
}


def _choice() -> str:
    name = realtime_setting("REALTIME_BUFFER")
    return str(name) if name else ("redis" if redis_url() else "memory")


@cache
def _buffer(name: str, url: str) -> ReplayBuffer:
    buffer: ReplayBuffer = import_string(_BUILTIN.get(name, name))()
    return buffer


def get_buffer() -> ReplayBuffer:
    """The process-wide buffer (one instance per configuration, so settings overrides in
    tests get their own)."""
    return _buffer(_choice(), redis_url())


def clear_cache() -> None:
    _buffer.cache_clear()
