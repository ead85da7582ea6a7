"""Micro-benchmark of one delivered text delta's CPU: model part -> frame (issue 16, W5).

N scripted streams each translate and emit paced (or burst) text deltas through the real
engine pieces (:class:`StepTranslator`, :class:`Generation` with its reducer) into a real
:class:`RealtimePublisher` (coalescing, replay buffer, channel layer) on a *run* thread with
its own event loop, as the executor does; on the *server* thread one real
:class:`ThreadConsumer` per stream (the channel-layer link, cursor, fold guard, JSON frame
encoding) receives them and writes its frames through a real daphne websocket protocol
(autobahn's framing) to a transport that counts them instead of a socket (``--writer send``:
a plain counting ASGI ``send`` instead, without the in-process fan-out's direct write that
daphne gets). Nothing touches the database: connect joins the group and starts at the
buffer's last number instead of loading a snapshot.

Arrangements: *embedded* (in-memory channel layer and replay buffer) or *redis* (channels-
redis and the Redis replay buffer from ``REDIS_URL``; both threads in this process, where
production has two processes). The result is process CPU (``time.process_time``, every
thread) per delivered delta, split by thread (``time.thread_time``), the time the cyclic
garbage collector ran (``gc.callbacks``; the server's thresholds, ``PAI["GC_TUNING"]``,
unless ``--gc default``), and with ``--profile`` a cProfile top list per thread::

    python -m benchmarks.delta_path --streams 50 --deltas 100 --every-ms 25
    REDIS_URL=redis://localhost:6379/9 python -m benchmarks.delta_path --profile
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import functools
import gc
import io
import json
import os
import pstats
import threading
import time
from types import SimpleNamespace
from typing import Any

__all__ = ["daphne_send", "daphne_server", "main"]


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    import django

    django.setup()


class _Clients:
    """Frames the consumers sent, counted per stream."""

    def __init__(self, streams: int, deltas: int) -> None:
        self.deltas = [0] * streams
        self.last_index = [-1] * streams
        self.disorder = 0
        self.expected = streams * deltas
        self.done = asyncio.Event()
        self.received = 0

    def sender(self, stream: int) -> Any:
        async def send(message: dict[str, Any]) -> None:
            text = message.get("text")
            if text is not None:
                self.received_text(stream, text)

        return send

    def received_text(self, stream: int, text: str) -> None:
        # What a client does with a frame: parse it (on the server thread here).
        for frame in _frames(text):
            if frame.get("type") != "generation.message.chunk":
                continue
            if frame["index"] <= self.last_index[stream]:
                self.disorder += 1
            self.last_index[stream] = frame["index"]
            if frame["chunk"].get("type") == "text-delta":
                self.deltas[stream] += 1
                self.received += 1
                if self.received >= self.expected:
                    self.done.set()


class _Transport:
    """A daphne connection's transport, minus the socket: unframes what autobahn writes
    (server frames are unmasked) and hands each text message to the client's count."""

    TLS = False

    def __init__(self, clients: _Clients, stream: int) -> None:
        self.clients, self.stream = clients, stream

    def write(self, data: bytes) -> None:
        if data[0] & 0x0F != 1:  # text frames only (no pings in a benchmark this short)
            return
        size = data[1] & 0x7F
        start = 2 if size < 126 else 4 if size == 126 else 10
        self.clients.received_text(self.stream, data[start:].decode())

    def getPeer(self) -> None:
        return None

    def getHost(self) -> None:
        return None


def daphne_send(server: Any, transport: Any) -> Any:
    """The ASGI ``send`` daphne gives a websocket application: ``handle_reply`` of its
    server, bound to an open connection's protocol (autobahn's), here over ``transport``."""
    from daphne.ws_protocol import WebSocketFactory

    factory = WebSocketFactory(server)
    factory.setProtocolOptions(  # as daphne's Server.run, with its default limits
        autoPingTimeout=20,
        allowNullOrigin=True,
        openHandshakeTimeout=5,
        maxMessagePayloadSize=1_048_576,
        maxFramePayloadSize=1_048_576,
    )
    protocol = factory.buildProtocol(None)
    protocol.transport = transport
    protocol._connectionMade()
    protocol.state = protocol.STATE_OPEN
    protocol.client_addr = ["127.0.0.1", 0]
    protocol.serverAccept = lambda subprotocol=None: None  # already open
    server.connections[protocol] = {}
    return functools.partial(server.handle_reply, protocol)


def daphne_server() -> Any:
    from daphne.server import Server

    server = Server.__new__(Server)  # only its connections and handle_reply are used
    server.connections = {}
    return server


class _GCTime:
    """CPU the cyclic collector took (every thread), from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._start
            self.collections += 1


def _frames(text: str) -> list[dict[str, Any]]:
    value = json.loads(text)
    return value if isinstance(value, list) else [value]


def _consumer_class() -> Any:
    from pai_threads.realtime.buffers import get_buffer
    from pai_threads.realtime.link import Outage
    from pai_threads.realtime.notify import register_subscriber_loop
    from pai_threads.realtime.sync import Cursor, FoldGuard
    from pai_threads.websocket.consumers import ThreadConsumer

    class BenchConsumer(ThreadConsumer):
        """The real consumer, connected without the database (no identity, no snapshot)."""

        async def connect(self) -> None:
            self.thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
            self._lock = asyncio.Lock()
            self._watchdog = None
            self._guard = FoldGuard()
            self._buffer_outage = Outage("bench")
            await self.accept()
            register_subscriber_loop()
            assert self.link is not None
            await self.link.join()
            buffer = get_buffer()
            state = await buffer.state(self.thread_id)
            self.cursor = Cursor(buffer=buffer, thread_id=self.thread_id, last=state.last_seq)
            self._joined = True
            self.connected.set()

    return BenchConsumer


async def _stream(index: int, thread_id: str, deltas: int, every: float, start: float) -> None:
    """One run's step: the model's parts through the translator into a Generation."""
    from pai_agents.engine.generation import Generation
    from pai_agents.engine.step_stream import StepTranslator
    from pai_agents.engine.stream_transform import translate_part
    from pai_threads.realtime.publisher import RealtimePublisher

    publisher = RealtimePublisher(thread_id)
    claim = SimpleNamespace(lease=SimpleNamespace(run_id=f"run_{index}"), thread_id=thread_id)
    message = {"id": f"msg_{index}", "role": "assistant", "parts": [], "metadata": {}}
    generation = Generation(claim, publisher, message)  # type: ignore[arg-type]
    translator = StepTranslator({})
    await generation.start(step=0)
    await generation.emit({"type": "start", "messageId": generation.message_id})
    await generation.emit({"type": "start-step"})
    parts: list[Any] = [{"type": "text-start", "id": "t"}]
    loop = asyncio.get_running_loop()
    for i in range(deltas):
        for part in parts:
            chunks = translate_part(translator, part)
            if chunks:
                await generation.emit(*chunks)
        parts = [{"type": "text-delta", "id": "t", "delta": f"<{i}|{time.time_ns()}> "}]
        wait = start + i * every - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
    for part in [*parts, {"type": "text-end", "id": "t"}]:
        await generation.emit(*translate_part(translator, part))
    await publisher.aclose()


def _run_thread(
    args: argparse.Namespace, profile: cProfile.Profile | None, out: dict[str, float]
) -> None:
    streams, every = args.streams, args.every_ms / 1000

    async def main() -> None:
        start = asyncio.get_running_loop().time() + 0.05
        # --spread: stream i ticks i/N of an interval after stream 0, so no two streams'
        # deltas are ready at once (what independent models look like to a worker).
        phase = every / streams if args.spread else 0.0
        await asyncio.gather(
            *(
                _stream(i, f"bench{os.getpid()}x{i}", args.deltas, every, start + i * phase)
                for i in range(streams)
            )
        )

    cpu = time.thread_time()
    if profile is not None:
        profile.enable()
    asyncio.run(main())
    if profile is not None:
        profile.disable()
    out["run"] = time.thread_time() - cpu


async def _serve(args: argparse.Namespace, profiles: dict[str, cProfile.Profile]) -> dict[str, Any]:
    consumer_class = _consumer_class()
    clients = _Clients(args.streams, args.deltas)
    inboxes: list[asyncio.Queue[dict[str, Any]]] = []
    tasks = []
    consumers = []
    server = daphne_server()
    for i in range(args.streams):
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        inbox.put_nowait({"type": "websocket.connect"})
        scope = {
            "type": "websocket",
            "path": "/",
            "query_string": b"",
            "headers": [],
            "url_route": {"kwargs": {"thread_id": f"bench{os.getpid()}x{i}"}},
        }
        consumer = consumer_class()
        consumer.connected = asyncio.Event()
        consumers.append(consumer)
        send = (
            daphne_send(server, _Transport(clients, i))
            if args.writer == "daphne"
            else clients.sender(i)
        )
        tasks.append(asyncio.ensure_future(consumer(scope, inbox.get, send)))
        inboxes.append(inbox)
        if len(consumers) % _CONNECT_WAVE == 0:
            await _connected(consumers[-_CONNECT_WAVE:], tasks)
    await _connected(consumers, tasks)
    times: dict[str, float] = {}
    profile = profiles.get("server")
    collector = _GCTime()
    gc.callbacks.append(collector)
    runner = threading.Thread(
        target=_run_thread,
        args=(args, profiles.get("run"), times),
        name="pai-runs",
    )
    wall, cpu, server_cpu = time.perf_counter(), time.process_time(), time.thread_time()
    if profile is not None:
        profile.enable()
    runner.start()
    with contextlib.suppress(TimeoutError):  # a lost delta: report it, do not hang
        await asyncio.wait_for(clients.done.wait(), timeout=args.deltas * args.every_ms / 1000 + 60)
    if profile is not None:
        profile.disable()
    runner.join()
    server_cpu = time.thread_time() - server_cpu
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    gc.callbacks.remove(collector)
    for inbox in inboxes:
        inbox.put_nowait({"type": "websocket.disconnect", "code": 1000})
    await asyncio.gather(*tasks, return_exceptions=True)
    delivered = sum(clients.deltas)
    return {
        "streams": args.streams,
        "deltas_per_stream": args.deltas,
        "writer": args.writer,
        "every_ms": args.every_ms,
        "spread": args.spread,
        "delivered": delivered,
        "expected": clients.expected,
        "out_of_order": clients.disorder,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "us_per_delta": round(cpu / max(1, delivered) * 1e6, 1),
        "run_thread_us_per_delta": round(times.get("run", 0.0) / max(1, delivered) * 1e6, 1),
        "server_thread_us_per_delta": round(server_cpu / max(1, delivered) * 1e6, 1),
        "gc_us_per_delta": round(collector.seconds / max(1, delivered) * 1e6, 1),
        "gc_collections": collector.collections,
    }


# Clients connect in waves: a hundred at once exceed the Redis connection pool's limit
# ("Too many connections": each join is a command of its own), which clients arriving
# over time never do.
_CONNECT_WAVE = 20


async def _connected(consumers: list[Any], tasks: list[asyncio.Future[Any]]) -> None:
    """Wait for ``consumers`` to connect; a consumer that failed ends the run with its error."""
    waits = [asyncio.ensure_future(c.connected.wait()) for c in consumers]
    pending: set[asyncio.Future[Any]] = set(waits)
    while pending:
        _, pending = await asyncio.wait(pending, timeout=1.0)
        for task in tasks:
            if task.done():
                task.result()  # raises the consumer's error (none of them should end yet)
    for wait in waits:
        wait.cancel()


def _top(profile: cProfile.Profile, limit: int) -> str:
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text)
    stats.sort_stats("tottime").print_stats(limit)
    return text.getvalue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--deltas", type=int, default=100)
    parser.add_argument("--every-ms", type=float, default=25.0, help="0: a burst")
    parser.add_argument(
        "--spread", action="store_true", help="streams tick out of phase (default: together)"
    )
    parser.add_argument(
        "--writer",
        choices=("daphne", "send"),
        default="daphne",
        help="frames through daphne's protocol (default) or a counting ASGI send",
    )
    parser.add_argument(
        "--gc",
        choices=("server", "default"),
        default="server",
        help="the server's collector thresholds (PAI['GC_TUNING'], default) or Python's",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--profile", action="store_true", help="cProfile top list per thread (thread CPU time)"
    )
    args = parser.parse_args(argv)
    _setup()
    from django.conf import settings

    if args.gc == "server":
        from pai_threads.executors.gc_tuning import tune_gc

        tune_gc()

    arrangement = "redis" if os.environ.get("REDIS_URL") else "embedded"
    results = []
    for _ in range(args.repeat):
        # CPU time of the profiled thread, not wall time: waits and other processes' load
        # (the machine is shared) would otherwise fill the list.
        profiles = (
            {name: cProfile.Profile(time.thread_time) for name in ("server", "run")}
            if args.profile
            else {}
        )
        result = asyncio.run(_serve(args, profiles))
        result["arrangement"] = arrangement
        result["coalesce_ms"] = settings.PAI.get("REALTIME_COALESCE_MS", "default")
        results.append(result)
        print(json.dumps(result))
        for name, profile in profiles.items():
            print(f"--- {name} thread, by own time ---")
            print(_top(profile, 25))
    best = sorted(r["us_per_delta"] for r in results)
    print(json.dumps({"arrangement": arrangement, "median_us_per_delta": best[len(best) // 2]}))


if __name__ == "__main__":
    main()
