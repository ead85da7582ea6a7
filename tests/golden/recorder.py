"""Recording what clients of a real server see: websocket frames, SSE lines, pai_chat lines.

:class:`Gates` is the test's side of :class:`tests.support.golden_executor.GatedExecutor`:
it releases the dispatches a request caused once the request has answered, and waits until
every released execution has returned. :class:`Observer` is a websocket client that records
every frame it gets, in order. :func:`quiesce` is the barrier between the steps of a
scenario: every execution has returned, and the observer has every event the thread's log
holds (a second connection's snapshot tells how far the log goes), so nothing is in flight
when the next step starts. No step waits for a fixed time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection

from tests.support.realtime import recv
from tests.support.server import Browser

__all__ = ["Gates", "Observer", "SseStream", "quiesce", "read_sse"]

Frame = dict[str, Any]
STEP_TIMEOUT = 30.0


class Gates:
    """The gate files of one server process (``$PAI_GOLDEN_GATES``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.released: list[str] = []

    def held(self) -> list[str]:
        """Dispatches waiting for their release (a ``.held`` file with no ``.go``)."""
        names = [p.name.removesuffix(".held") for p in self.directory.glob("*.held")]
        return sorted(n for n in names if not (self.directory / f"{n}.go").exists())

    def release_held(self) -> list[str]:
        """Let every dispatch waiting now go (their runs execute); returns the run ids."""
        names = self.held()
        for name in names:
            self.open(f"{name}.go")
            self.released.append(name)
        return [name.rsplit(".", 1)[0] for name in names]

    def open(self, name: str) -> None:
        (self.directory / name).touch()

    @property
    def last_run(self) -> str:
        return self.released[-1].rsplit(".", 1)[0]

    async def settle(self, timeout: float = STEP_TIMEOUT) -> None:
        """Until every released execution has returned; then no dispatch may be pending."""

        def done() -> bool:
            return all((self.directory / f"{n}.done").exists() for n in self.released)

        await _until(done, timeout, lambda: f"executions {self.released} to return")
        assert not self.held(), f"dispatches nobody released: {self.held()}"


class Observer:
    """One websocket connection recording every frame it receives."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.frames: list[Frame] = []
        self.last_seq = 0
        self._changed = asyncio.Event()
        self._requests = 0
        self._reader = asyncio.create_task(self._read())

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls, browser: Browser, thread_id: str, *, since: int | None = None
    ) -> AsyncIterator[Observer]:
        async with browser.websocket(thread_id, since=since) as ws:
            observer = cls(ws)
            try:
                await observer.wait_for(lambda f: f["type"] == "synced")
                yield observer
            finally:
                observer._reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await observer._reader

    async def _read(self) -> None:
        with contextlib.suppress(Exception):  # a closed socket ends the recording
            async for raw in self.ws:
                frame = json.loads(raw)
                self.frames.append(frame)
                if isinstance(frame.get("seq"), int):
                    self.last_seq = max(self.last_seq, frame["seq"])
                self._changed.set()
        self._changed.set()

    async def wait_for(
        self, accept: Callable[[Frame], bool], *, after: int = 0, timeout: float = STEP_TIMEOUT
    ) -> Frame:
        """The first frame from index ``after`` on that ``accept`` takes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for frame in self.frames[after:]:
                if accept(frame):
                    return frame
            if self._reader.done():
                raise AssertionError(f"the websocket closed; frames: {self.frames[-5:]}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), max(0.01, deadline - loop.time()))
            except TimeoutError:
                raise AssertionError(
                    f"no such frame after {timeout:.0f}s; last frames: {self.frames[-5:]}"
                ) from None

    async def command(self, frame: Frame) -> Frame:
        """Send a command; its ``ack`` (or error) frame."""
        self._requests += 1
        request_id = f"r{self._requests}"
        start = len(self.frames)
        await self.ws.send(json.dumps({**frame, "requestId": request_id}))
        reply = await self.wait_for(lambda f: f.get("requestId") == request_id, after=start)
        assert reply["type"] == "ack", reply
        return reply

    async def reach(self, seq: int) -> None:
        """Until a frame numbered ``seq`` or later has arrived."""
        await self.wait_for(lambda f: isinstance(f.get("seq"), int) and f["seq"] >= seq)

    async def closed(self, timeout: float = STEP_TIMEOUT) -> None:
        """Until the server has closed the connection (every frame it sent is recorded)."""
        await asyncio.wait_for(asyncio.shield(self._reader), timeout)


async def quiesce(browser: Browser, thread_id: str, gates: Gates, observer: Observer) -> None:
    """Every released execution returned and every logged event reached ``observer``."""
    await gates.settle()
    async with browser.websocket(thread_id) as probe:
        snapshot = await recv(probe)
    assert snapshot["type"] == "snapshot", snapshot
    await observer.reach(int(snapshot["seq"]))


# -- SSE ----------------------------------------------------------------------------------------


class SseStream:
    """One SSE response being read: its status, and each ``data:`` payload as it arrives."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.status = response.status_code
        self.items: list[Any] = []
        self._lines = response.aiter_lines()

    async def read_until(self, accept: Callable[[Any], bool]) -> None:
        """Read until a payload ``accept`` takes (``"[DONE]"`` for the end)."""
        async with asyncio.timeout(STEP_TIMEOUT):
            async for line in self._lines:
                item = parse_sse_line(line)
                if item is None:
                    continue
                self.items.append(item)
                if accept(item):
                    return
        raise AssertionError(f"the stream ended early: {self.items[-5:]}")

    async def read_to_end(self) -> None:
        """Everything left, up to the end of the body ([DONE] or a cut connection)."""
        with contextlib.suppress(httpx.HTTPError):
            async with asyncio.timeout(STEP_TIMEOUT):
                async for line in self._lines:
                    item = parse_sse_line(line)
                    if item is not None:
                        self.items.append(item)
        await self.response.aclose()

    def recording(self, request: str) -> dict[str, Any]:
        return {"request": request, "status": self.status, "data": self.items}


def parse_sse_line(line: str) -> Any:
    """A ``data:`` payload (JSON, or the string ``[DONE]``); None for blank lines and the
    keep-alive comments, which come on a timer."""
    if not line.startswith("data: "):
        return None
    data = line[len("data: ") :]
    return data if data == "[DONE]" else json.loads(data)


async def read_sse(browser: Browser, method: str, path: str, body: Any = None) -> SseStream:
    """Open an SSE request (the headers are in when this returns)."""
    headers = {"X-CSRFToken": browser.csrf}
    request = browser.http.build_request(method, f"/api/pai{path}", json=body, headers=headers)
    return SseStream(await browser.http.send(request, stream=True))


async def _until(probe: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not probe():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what()}")
        await asyncio.sleep(0.01)
