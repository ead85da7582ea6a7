"""Replay buffer backends, chosen by ``PAI["REALTIME_BUFFER"]`` (see :mod:`.base`)."""

from __future__ import annotations

from functools import cache
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver
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


_current: ReplayBuffer | None = None


def get_buffer() -> ReplayBuffer:
    """The process-wide buffer (one instance per configuration, so settings overrides in
    tests get their own). Every published batch asks for it: the choice is remembered
    until the settings it depends on change."""
    global _current
    buffer = _current
    if buffer is None:
        buffer = _current = _buffer(_choice(), redis_url())
    return buffer


def _forget() -> None:
    global _current
    _current = None


def clear_cache() -> None:
    _forget()
    _buffer.cache_clear()


@receiver(setting_changed)
def _settings_changed(*, setting: str, **_: Any) -> None:
    if setting in ("PAI", "REDIS_URL"):
        _forget()
