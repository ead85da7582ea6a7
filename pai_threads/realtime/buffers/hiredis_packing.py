"""Redis commands of the asyncio client packed by hiredis, as redis-py's own synchronous
client packs them.

With hiredis installed (the ``redis`` extra), redis-py's synchronous connections pack
commands with ``hiredis.pack_command`` and its asyncio connections parse replies with
hiredis, but still pack in Python: ~8 us for a publication's ``EVALSHA`` against ~1.4 us,
about 6% of a Celery worker's CPU in benchmark W5 (one script call per published batch).
:func:`pack_with_hiredis` gives a pool's connections the synchronous client's packer; the
bytes on the wire are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from redis.exceptions import DataError

_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as _pack
except ImportError:  # pragma: no cover - the redis extra installs it
    _pack = None

__all__ = ["pack_with_hiredis"]


class _HiredisPacking:
    """``pack_command`` of redis-py's ``HiredisRespSerializer`` (the synchronous client's),
    for an asyncio connection class."""

    def pack_command(self, *args: Any) -> list[bytes]:
        # As redis-py does: a command name of several words ("CONFIG GET") goes as several.
        if isinstance(args[0], str):
            args = (*args[0].encode().split(), *args[1:])
        elif b" " in args[0]:
            args = (*args[0].split(), *args[1:])
        assert _pack is not None  # (only classes made by pack_with_hiredis get here)
        try:
            return [_pack(args)]
        except TypeError:
            # hiredis takes bytes, str, int and float; redis-py also sends buffers as bytes
            # (converted only when packing failed: a publication's args need no pass).
            args = tuple(bytes(a) if isinstance(a, bytearray | memoryview) else a for a in args)
        try:
            return [_pack(args)]
        except TypeError as exc:
            raise DataError(str(exc)) from exc


@cache
def _packing(connection_class: type) -> type:
    return type(f"Hiredis{connection_class.__name__}", (_HiredisPacking, connection_class), {})


def pack_with_hiredis(pool: Any) -> Any:
    """Make ``pool``'s new connections pack commands with hiredis (whatever their class:
    TCP, TLS, Unix socket); ``pool`` unchanged without hiredis. Returns ``pool``."""
    if _pack is not None and not issubclass(pool.connection_class, _HiredisPacking):
        pool.connection_class = _packing(pool.connection_class)
    return pool
