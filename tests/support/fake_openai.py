"""A local OpenAI-compatible Chat Completions server for tests, the demo and benchmarks.

Real HTTP on 127.0.0.1 (stdlib only), so the real ``openai`` SDK and our provider run end to
end while the model's answers stay scripted. Each POST to ``/v1/chat/completions`` takes the next
scripted response::

    with FakeOpenAIServer(responses=[
        [*text_chunks("Hello there"), finish_chunk("stop"), usage_chunk(5, 2)],
        ErrorResponse(429),
    ]) as server:
        model = OpenAIChatModel(model="fake", base_url=server.base_url)
        ...
        assert server.requests[0]["stream_options"] == {"include_usage": True}

A scripted response is one of:

* a list of chunk dicts (raw ``chat.completion.chunk`` objects), sent as SSE ending in
  ``data: [DONE]``; :class:`Pause` items in the list sleep between chunks;
* :class:`SSEResponse` for per-chunk delays, no ``[DONE]``, holding the connection open, or
  dropping it mid-stream;
* :class:`ErrorResponse` for an HTTP error status with an OpenAI-style JSON error body;
* a callable taking the parsed request body and returning one of the above (echo servers).

When the script runs out, ``fallback`` answers (if given), else a 400 error that names the
problem (400 because the SDK does not retry it).
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeAlias, cast

__all__ = [
    "Chunks",
    "ErrorResponse",
    "Exchange",
    "FakeOpenAIServer",
    "Pause",
    "SSEResponse",
    "Script",
    "chunk",
    "finish_chunk",
    "reasoning_chunks",
    "text_chunks",
    "text_response",
    "tool_call_chunks",
    "usage_chunk",
]

CHUNK_ID = "chatcmpl-fake"
MODEL = "fake-model"
CREATED = 1_700_000_000


# -- scripted responses -------------------------------------------------------------------------


@dataclass(frozen=True)
class Pause:
    """An item in a chunk list: sleep this many seconds before the next chunk."""

    seconds: float


@dataclass
class SSEResponse:
    """A streamed answer.

    ``delay`` sleeps before every chunk; ``done`` sends the ``[DONE]`` sentinel; ``hang`` keeps
    the connection open after the last chunk until the client disconnects or the server stops
    (for abort tests: the client must stop reading on its own); ``drop`` closes the connection
    after the last chunk without ending the response (a server restart mid-stream).
    """

    chunks: Sequence[dict[str, Any] | Pause]
    delay: float = 0.0
    done: bool = True
    hang: bool = False
    drop: bool = False


@dataclass
class ErrorResponse:
    """An HTTP error with an OpenAI-style body (``{"error": {"message", "type", "code"}}``)."""

    status: int
    message: str = "scripted error"
    type: str = "server_error"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {
            "error": {"message": self.message, "type": self.type, "param": None, "code": self.code}
        }


Chunks: TypeAlias = "list[dict[str, Any] | Pause]"
Script: TypeAlias = "Chunks | SSEResponse | ErrorResponse | Callable[[dict[str, Any]], Script]"


@dataclass
class Exchange:
    """One request the server received and what became of its response.

    ``headers`` has lower-cased names; ``client_disconnected`` is set when the client hung up
    before the response was complete (what abort tests wait for).
    """

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    chunks_sent: int = 0
    completed: bool = False
    client_disconnected: threading.Event = field(default_factory=threading.Event)


# -- chunk builders -----------------------------------------------------------------------------


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    choices: bool = True,
    id: str = CHUNK_ID,
    model: str = MODEL,
) -> dict[str, Any]:
    """One raw ``chat.completion.chunk``; ``choices=False`` gives the empty-choices usage form."""
    body: dict[str, Any] = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": [],
    }
    if choices:
        body["choices"] = [
            {"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}
        ]
    if usage is not None:
        body["usage"] = usage
    return body


def _split(text: str, pieces: int | Sequence[str] | None) -> list[str]:
    if pieces is None:
        # Word-like tokens that keep their leading space, as real tokenizers do.
        words: list[str] = []
        for index, word in enumerate(text.split(" ")):
            words.append(word if index == 0 else " " + word)
        return [word for word in words if word]
    if isinstance(pieces, int):
        size = max(1, -(-len(text) // max(1, pieces)))
        return [text[i : i + size] for i in range(0, len(text), size)]
    if "".join(pieces) != text:
        raise ValueError("pieces must join to the text")
    return list(pieces)


def text_chunks(text: str, *, pieces: int | Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Content deltas for ``text``: split into words (default), ``pieces`` parts, or given parts.

    The first delta carries ``role: assistant`` like OpenAI's own first chunk.
    """
    parts = _split(text, pieces)
    return [
        chunk({"role": "assistant", "content": part} if index == 0 else {"content": part})
        for index, part in enumerate(parts)
    ]


def reasoning_chunks(
    text: str, *, pieces: int | Sequence[str] | None = None, field: str = "reasoning_content"
) -> list[dict[str, Any]]:
    """Reasoning deltas as vLLM/DeepSeek send them (``field="reasoning"`` for OpenRouter style)."""
    return [chunk({field: part}) for part in _split(text, pieces)]


def tool_call_chunks(
    call_id: str, name: str, arguments_json: str, *, split_into: int = 3, index: int = 0
) -> list[dict[str, Any]]:
    """A streamed tool call: id and name first, then ``arguments_json`` in ``split_into`` parts."""
    first = chunk(
        {
            "tool_calls": [
                {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
            ]
        }
    )
    rest = [
        chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        for piece in _split(arguments_json, split_into)
    ]
    return [first, *rest]


def finish_chunk(reason: str | None = "stop") -> dict[str, Any]:
    """The chunk that closes the choice with ``finish_reason``."""
    return chunk({}, finish_reason=reason)


def usage_chunk(
    prompt: int, completion: int, reasoning: int | None = None, cached: int | None = None
) -> dict[str, Any]:
    """The final empty-choices chunk ``stream_options.include_usage`` asks for."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return chunk(usage=usage, choices=False)


def text_response(
    text: str, *, prompt_tokens: int = 10, completion_tokens: int | None = None
) -> list[dict[str, Any]]:
    """A whole plain answer: text deltas, ``stop``, and usage."""
    deltas = text_chunks(text)
    completion = len(deltas) if completion_tokens is None else completion_tokens
    return [*deltas, finish_chunk("stop"), usage_chunk(prompt_tokens, completion)]


# -- server -------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    timeout = 30  # idle keep-alive connections do not outlive a test run

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        try:
            self._chat_completions()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client hung up; nothing left to answer

    def _chat_completions(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, {"error": {"message": "request body is not JSON"}})
            return
        exchange = Exchange(
            path=self.path, headers={k.lower(): v for k, v in self.headers.items()}, body=body
        )
        fake = self.server.fake
        fake._record(exchange)
        try:
            script = fake._next_script(body)
            if isinstance(script, ErrorResponse):
                self._send_json(script.status, script.body(), script.headers)
                exchange.completed = True
                return
            response = script if isinstance(script, SSEResponse) else SSEResponse(chunks=script)
            self._stream(response, exchange)
        except (BrokenPipeError, ConnectionResetError):
            exchange.client_disconnected.set()
            raise

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, response: SSEResponse, exchange: Exchange) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for item in response.chunks:
            if isinstance(item, Pause):
                if self._wait_for_disconnect(item.seconds, exchange):
                    return
                continue
            if response.delay and self._wait_for_disconnect(response.delay, exchange):
                return
            self._write_event(json.dumps(item))
            exchange.chunks_sent += 1
        if response.drop:
            self.wfile.flush()
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if response.hang:
            while not self._wait_for_disconnect(0.05, exchange):
                if self.server.fake._stopping.is_set():
                    break
            self.close_connection = True
            return
        if response.done:
            self._write_event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        exchange.completed = True

    def _write_event(self, data: str) -> None:
        payload = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def _wait_for_disconnect(self, seconds: float, exchange: Exchange) -> bool:
        """Sleep ``seconds`` but notice at once when the client hangs up (EOF on the socket)."""
        deadline = time.monotonic() + seconds
        sock: socket.socket = self.connection
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.server.fake._stopping.is_set():
                return False
            readable, _, _ = select.select([sock], [], [], min(remaining, 0.05))
            if readable:
                try:
                    peek = sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    peek = b""
                if not peek:
                    exchange.client_disconnected.set()
                    self.close_connection = True
                    return True
                time.sleep(min(remaining, 0.01))  # pipelined bytes: not a hang-up


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up mid-response is what abort tests do; stay quiet about it.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeOpenAIServer:
    """A scripted OpenAI-compatible server on 127.0.0.1; use as a context manager.

    ``base_url`` ends in ``/v1`` like OpenAI's; ``requests`` holds the parsed JSON bodies of the
    chat completion requests received, ``exchanges`` the same with headers and stream progress.
    """

    def __init__(
        self,
        responses: Iterable[Script] = (),
        *,
        fallback: Script | None = None,
    ) -> None:
        self._scripts: deque[Script] = deque(responses)
        self._fallback = fallback
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.exchanges: list[Exchange] = []

    # lifecycle

    def start(self) -> FakeOpenAIServer:
        server = _HTTPServer(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # inspection and scripting

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAIServer is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [exchange.body for exchange in self.exchanges]

    def add(self, *responses: Script | list[dict[str, Any]]) -> None:
        """Append scripted responses (also allowed while the server runs)."""
        with self._lock:
            self._scripts.extend(cast("tuple[Script, ...]", responses))

    @property
    def pending(self) -> int:
        """Scripted responses not used yet."""
        with self._lock:
            return len(self._scripts)

    def _record(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)

    def _next_script(self, body: dict[str, Any]) -> Chunks | SSEResponse | ErrorResponse:
        with self._lock:
            script = self._scripts.popleft() if self._scripts else self._fallback
        if script is None:
            return ErrorResponse(
                400, "FakeOpenAIServer: no scripted response left", type="invalid_request_error"
            )
        while callable(script):
            script = script(body)
        return script
