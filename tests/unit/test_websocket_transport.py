"""The eager write on daphne's transport (issue 16): frames leave at once, in order.

A real Twisted TCP transport on a real socket pair, with a Twisted reactor that is created
here and never installed: what the eager write sends must be on the wire before the
reactor runs, what the socket did not take must be sent after it, in order, and nothing
may overtake bytes already waiting in the transport's buffer.
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from twisted.internet.protocol import Protocol
from twisted.internet.selectreactor import SelectReactor
from twisted.internet.tcp import Connection

from pai_threads.websocket.transport import EagerWrite, write_eagerly


class _Transport(Connection):
    """Twisted's TCP connection as daphne's server side has it: open, plain TCP."""

    def __init__(self, skt: socket.socket, reactor: SelectReactor) -> None:
        super().__init__(skt, Protocol(), reactor)  # type: ignore[arg-type]  # (zope interface)
        self.connected = True


class _DaphneProtocol:
    """What daphne's ASGI ``send`` carries: its websocket protocol with ``transport``."""

    def __init__(self, transport: object) -> None:
        self.transport = transport


async def _handle_reply(protocol: object, message: dict[str, object]) -> None:
    """Stands for daphne's ``Server.handle_reply`` (only its partial's shape matters)."""


Wire = tuple[_Transport, socket.socket, SelectReactor]


@pytest.fixture()
def wire() -> Iterator[Wire]:
    ours, peer = socket.socketpair()
    reactor = SelectReactor()
    transport = _Transport(ours, reactor)
    try:
        yield transport, peer, reactor
    finally:
        reactor.removeAll()
        ours.close()
        peer.close()


def _read_available(peer: socket.socket) -> bytes:
    peer.setblocking(False)
    chunks = []
    while True:
        try:
            chunk = peer.recv(1 << 20)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _install(transport: _Transport) -> None:
    send = functools.partial(_handle_reply, _DaphneProtocol(transport))
    assert write_eagerly(send)
    assert isinstance(transport.__dict__["write"], EagerWrite)


def test_a_frame_is_on_the_wire_before_the_reactor_runs(wire: Wire) -> None:
    transport, peer, reactor = wire
    _install(transport)
    transport.write(b"frame-1")
    transport.write(b"frame-2")
    assert _read_available(peer) == b"frame-1frame-2"
    # Nothing was left for the reactor: no writer was registered for it.
    assert transport not in reactor.getWriters()


def test_what_the_socket_does_not_take_follows_in_order(wire: Wire) -> None:
    transport, peer, reactor = wire
    _install(transport)
    big = bytes(range(256)) * 40_000  # ~10 MB: more than a socket buffer holds
    transport.write(big)
    transport.write(b"after")  # queued behind the rest of ``big``, never before it
    assert transport in reactor.getWriters()
    received = bytearray(_read_available(peer))
    assert 0 < len(received) < len(big)
    while len(received) < len(big) + 5:
        reactor.doIteration(0.05)
        received += _read_available(peer)
    assert bytes(received) == big + b"after"
    transport.write(b"again")  # the buffer drained: eager once more
    assert _read_available(peer) == b"again"


def test_a_closing_transport_keeps_twisted_s_write(wire: Wire) -> None:
    transport, peer, reactor = wire
    _install(transport)
    transport.disconnecting = True
    transport.write(b"late")
    assert _read_available(peer) == b""  # buffered: Twisted flushes it before closing
    assert transport in reactor.getWriters()


def test_only_daphne_plain_tcp_transports_get_it(wire: Wire) -> None:
    transport, _peer, _reactor = wire

    async def other_server_send(message: dict[str, object]) -> None: ...

    assert not write_eagerly(other_server_send)  # e.g. uvicorn's send
    assert not write_eagerly(functools.partial(_handle_reply, object()))
    transport.TLS = True
    assert not write_eagerly(functools.partial(_handle_reply, _DaphneProtocol(transport)))
    assert "write" not in transport.__dict__


class _Recorder:
    """A transport that keeps what is written."""

    TLS = False

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def getPeer(self) -> None:
        return None

    def getHost(self) -> None:
        return None


def _open_daphne_connection() -> tuple[Any, _Recorder, Any]:
    """Daphne's ASGI send, over a recorder, and its websocket protocol (autobahn's),
    open, with daphne's options."""
    from benchmarks.delta_path import daphne_send, daphne_server

    recorder = _Recorder()
    send = daphne_send(daphne_server(), recorder)
    return send, recorder, send.args[0]


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65_535, 65_536, 200_000, 500_000])
def test_the_frame_writer_writes_autobahn_s_bytes(size: int) -> None:
    """Framed here or by autobahn, a text message is the same bytes on the wire."""
    from pai_threads.websocket.transport import frame_writer

    send, recorder, protocol = _open_daphne_connection()
    write = frame_writer(send)
    assert write is not None
    text = ("é" * size)[: max(0, size - size // 3)] + "x" * (size // 3)  # multi-byte UTF-8 too
    with pytest.MonkeyPatch.context() as patch:  # framed here, not by autobahn
        patch.setattr(protocol, "sendMessage", lambda *a, **k: pytest.fail("autobahn framed"))
        write(text)
    ours = b"".join(recorder.written)
    recorder.written.clear()
    protocol.sendMessage(text.encode())
    assert ours == b"".join(recorder.written)


def test_the_frame_writer_leaves_other_frames_to_autobahn() -> None:
    """Compression, a fragment size or a closed connection: autobahn's own path."""
    from autobahn.exception import PayloadExceededError
    from autobahn.websocket.protocol import Disconnected

    from pai_threads.websocket.transport import frame_writer

    send, recorder, protocol = _open_daphne_connection()
    write = frame_writer(send)
    assert write is not None
    with pytest.raises(PayloadExceededError):  # over daphne's limit: autobahn refuses it
        write("x" * 1_048_577)
    assert recorder.written == []
    protocol.state = protocol.STATE_CLOSED
    with pytest.raises(Disconnected):
        write("late")
    send.func.__self__.connections[protocol]["disconnected"] = True
    write("gone")  # dropped, as daphne's handle_reply drops it
    assert recorder.written == []
    send, recorder, protocol = _open_daphne_connection()
    protocol.autoFragmentSize = 4  # (options are set before the first frame)
    write = frame_writer(send)
    assert write is not None
    write("fragmented")
    assert len(recorder.written) == 3  # three frames of at most 4 bytes
