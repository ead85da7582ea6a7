"""Websocket frames written to daphne's socket at once, not on the reactor's next pass.

Twisted's TCP transport never writes in ``write``: it buffers the bytes, registers the
socket as a writer (an ``epoll_ctl``), and on the loop's next pass sends them and
unregisters it (another ``epoll_ctl``). On the live path that is two selector changes and
a loop pass per frame per subscriber: benchmark W5 profiled it at about a third of
daphne's loop thread. :func:`write_eagerly` gives one connection's transport the write
asyncio's own transports have: when nothing is queued, send right away, and buffer (the
transport's own way) only what the socket did not take.

Only for a plain TCP connection of daphne (the ASGI ``send`` is
``functools.partial(server.handle_reply, protocol)``); any other server, TLS, or a
Twisted without these transport attributes keeps its own write.

:func:`frame_writer` is the same ``send`` without its coroutine: daphne's
``handle_reply`` never suspends (it checks the connection and calls the protocol), so a
frame can be written from plain synchronous code, which in-process fan-out uses
(:mod:`pai_threads.realtime.layers`). It also frames the text itself when autobahn would
write exactly one plain frame (open, no compression, masking, fragmentation, frame or octet
logging or queued sync writes, within the message size limit daphne sets, else autobahn
raises as usual): autobahn's own path formats four debug-log
arguments per frame (``hltype``, ``hlval``, through click) whether or not anything logs
them, ~5 us of daphne's loop per frame per subscriber. The bytes on the wire are the same;
autobahn's traffic counters (which daphne never reads) do not count these frames.
"""

from __future__ import annotations

import errno
import functools
import struct
from collections.abc import Callable
from typing import Any

__all__ = ["EagerWrite", "frame_writer", "write_eagerly"]

_RETRY_LATER = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS})
# The transport state the eager path reads (Twisted's ``FileDescriptor``): without all of
# them (another Twisted) the transport keeps its own write.
_STATE = ("socket", "connected", "disconnecting", "dataBuffer", "offset", "_tempDataBuffer")


class EagerWrite:
    """A transport's ``write``: straight to the socket while nothing waits in its buffer."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.buffered: Callable[[bytes], None] = transport.write  # the class's own

    def idle(self) -> bool:
        """Nothing is queued and the connection is open for writing."""
        t = self.transport
        return bool(
            t.connected
            and not t.TLS
            and not t.disconnecting
            and not getattr(t, "_writeDisconnected", False)
            and not t._tempDataBuffer
            and t.offset >= len(t.dataBuffer)
        )

    def __call__(self, data: bytes) -> None:
        if not data or not self.idle():
            self.buffered(data)  # behind what waits (or Twisted's checks): in order
            return
        try:
            sent = self.transport.socket.send(data)
        except OSError as exc:
            # Full: Twisted sends it when the socket is writable. Any other failure: Twisted
            # meets it on its own attempt and closes the connection its usual way.
            sent = 0
            if exc.errno not in _RETRY_LATER:
                self.buffered(data)
                return
        if sent < len(data):
            self.buffered(data[sent:])


def write_eagerly(send: Any) -> bool:
    """Give the transport behind daphne's ASGI ``send`` an :class:`EagerWrite`; whether
    it has one now. Safe to call more than once per connection."""
    if not isinstance(send, functools.partial) or not send.args:
        return False
    transport = getattr(send.args[0], "transport", None)
    if transport is None or getattr(transport, "TLS", True):
        return False  # not daphne's, or TLS: Twisted encrypts in its write
    if isinstance(transport.__dict__.get("write"), EagerWrite):
        return True
    try:
        from twisted.internet.tcp import Connection
    except ImportError:  # pragma: no cover - daphne depends on Twisted
        return False
    if not isinstance(transport, Connection) or not all(hasattr(transport, a) for a in _STATE):
        return False
    transport.write = EagerWrite(transport)  # type: ignore[method-assign]
    return True


def frame_writer(send: Any) -> Callable[[str], None] | None:
    """A synchronous ``websocket.send`` of a text frame through daphne's protocol, with
    ``Server.handle_reply``'s own check (a closed connection's frame is dropped); None
    for any other server. Raises what the protocol raises."""
    if not isinstance(send, functools.partial) or not send.args:
        return None
    protocol, server = send.args[0], getattr(send.func, "__self__", None)
    connections = getattr(server, "connections", None)
    if (
        getattr(send.func, "__name__", "") != "handle_reply"
        or not type(server).__module__.startswith("daphne.")
        or not isinstance(connections, dict)
        or not callable(getattr(protocol, "handle_reply", None))
    ):
        return None

    # The connection's entry in daphne's table: daphne marks it ``disconnected`` before it
    # drops it, so the entry, once found, is enough to read (no hash of the protocol, a
    # Python ``__hash__`` in daphne, per frame).
    found: list[dict[str, Any]] = []

    def write(text: str) -> None:
        if not found:
            state = connections.get(protocol)
            if state is None:
                return
            found.append(state)
        if found[0].get("disconnected", None):
            return
        if not plain(protocol):
            protocol.handle_reply({"type": "websocket.send", "text": text})
            return
        payload = text.encode()
        size = len(payload)
        if 0 < protocol.maxMessagePayloadSize < size:  # autobahn refuses it its own way
            protocol.handle_reply({"type": "websocket.send", "text": text})
            return
        if size <= 125:
            header = bytes((_FIN_TEXT, size))
        elif size <= 0xFFFF:
            header = struct.pack("!BBH", _FIN_TEXT, 126, size)
        else:
            header = struct.pack("!BBQ", _FIN_TEXT, 127, size)
        protocol.transport.write(header + payload)

    plain = _PlainFrames()
    return write


# The first byte of a whole (FIN) text frame without extension bits.
_FIN_TEXT = 0x81


class _PlainFrames:
    """Whether autobahn would write a text message as one plain frame right now: its
    options (copied from the factory when the connection was made) once, its state each
    time."""

    options_checked = False

    def __call__(self, protocol: Any) -> bool:
        try:  # (attribute reads, not getattr with defaults: once per frame per subscriber)
            if (
                protocol.state != protocol.STATE_OPEN
                or protocol._perMessageCompress is not None
                or protocol.send_queue
            ):
                return False
        except AttributeError:  # not autobahn's protocol as this module knows it
            return False
        if not self.options_checked:
            if not _plain_options(protocol):
                return False  # (checked again next time: cheap, and never true for daphne)
            self.options_checked = True
        return True


def _plain_options(protocol: Any) -> bool:
    return bool(
        getattr(protocol, "factory", None) is not None
        and protocol.factory.isServer
        and not protocol.maskServerFrames
        and not protocol.autoFragmentSize
        and isinstance(protocol.maxMessagePayloadSize, int)
        and not protocol.logFrames
        and not protocol.logOctets
        and not protocol.trackedTimings
    )
