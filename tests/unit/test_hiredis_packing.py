"""Commands of PAI's asyncio Redis clients are packed by hiredis, byte for byte as redis-py
packs them in Python (pai_threads.realtime.buffers.hiredis_packing)."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import (
    Connection,
    ConnectionPool,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.exceptions import DataError

from pai_threads.realtime.buffers.hiredis_packing import pack_with_hiredis

COMMANDS: list[tuple[Any, ...]] = [
    ("EVALSHA", "a" * 40, 2, "pai:k1", b"pai:k2", "300000 2000 1", '{"d":"é\\u0000"}', b"\x82\xa4"),
    ("SET", "k", "é\x00x", "PX", 1500),
    ("ZADD", "k", 1.5, "m", 1e20, "n", -3, "o"),
    ("CONFIG GET", "maxmemory"),  # a command name of two words goes as two
    (b"SCRIPT LOAD", "return 1"),
    ("SET", bytearray(b"k"), memoryview(b"v")),
]


def _packed(connection: Any, args: tuple[Any, ...]) -> bytes:
    return b"".join(bytes(chunk) for chunk in connection.pack_command(*args))


@pytest.mark.parametrize("args", COMMANDS)
def test_the_bytes_are_redis_pys_own(args: tuple[Any, ...]) -> None:
    pool = pack_with_hiredis(ConnectionPool(connection_class=Connection))
    hiredis_connection = pool.connection_class()
    assert type(hiredis_connection).__name__ == "HiredisConnection"
    assert _packed(hiredis_connection, args) == _packed(Connection(), args)


def test_a_value_redis_py_refuses_is_refused_the_same_way() -> None:
    connection = pack_with_hiredis(ConnectionPool()).connection_class()
    with pytest.raises(DataError):
        connection.pack_command("SET", "k", object())


@pytest.mark.parametrize("kind", [Connection, SSLConnection, UnixDomainSocketConnection])
def test_every_connection_kind_keeps_its_own_class(kind: type) -> None:
    """TLS and Unix sockets keep their transport; applying it twice changes nothing."""
    pool = pack_with_hiredis(ConnectionPool(connection_class=kind))
    assert issubclass(pool.connection_class, kind)
    again = pack_with_hiredis(pool).connection_class
    assert again is pool.connection_class
