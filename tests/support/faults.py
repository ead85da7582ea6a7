"""The service-fault harness (issue 15): the whole stack as processes, on servers a test owns.

A fault test restarts PostgreSQL or Redis under everything, so it owns every part: its own
servers (``scripts/services.sh start``), daphne, two Celery workers (threads pool) and the
sweeper daemon (``pai_recover --loop``), as docs/operations.md recommends running them. This
process reads the stack's database through the ORM (:func:`own_database`), so the durable
harness's checks apply unchanged; :class:`ThreadWatcher` is a websocket client that reconnects
like ``client.js``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import dj_database_url
import httpx
import pytest
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.test import override_settings
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import connect
from websockets.typing import Origin

from tests.support.durable_harness import logs, start_workers, wait_until
from tests.support.server import DaphneServer
from tests.support.thread_state import ThreadState
from tests.support.workers import REPO_ROOT, CeleryWorker, SweeperProcess

__all__ = [
    "ApiSession",
    "FaultStack",
    "PrivateServices",
    "ThreadWatcher",
    "fault_stack",
    "own_database",
    "private_services",
    "tolerant",
    "without_times",
]

T = TypeVar("T")

SERVICES_SCRIPT = REPO_ROOT / "scripts" / "services.sh"


class PrivateServices:
    """A test's own PostgreSQL and Redis, which it may take down and bring back."""

    def __init__(self, directory: Path, env: dict[str, str]) -> None:
        self.directory = directory
        self.env = env

    @property
    def postgres_url(self) -> str:
        return self.env["PAI_TEST_POSTGRES_URL"]

    @property
    def redis_url(self) -> str:
        return self.env["PAI_TEST_REDIS_URL"]

    def down(self, service: str) -> None:
        """Stop ``service`` ("postgres": a fast shutdown; "redis"), keeping its port."""
        _services_sh("down", self.directory, service)

    def up(self, service: str) -> None:
        """Start it again on the same port (Redis comes back empty)."""
        _services_sh("up", self.directory, service)


def _services_sh(*args: str | Path) -> str:
    done = subprocess.run(
        [str(SERVICES_SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"scripts/services.sh {' '.join(map(str, args))} failed\n{done.stderr}"
        )
    return done.stdout


@contextlib.contextmanager
def private_services(directory: Path) -> Iterator[PrivateServices]:
    """PostgreSQL and Redis of this test only (never the shared servers other tests use)."""
    _services_sh("start", directory)
    try:
        env = {}
        for line in (directory / "env").read_text().splitlines():
            name, _, value = line.removeprefix("export ").partition("=")
            env[name] = shlex.split(value)[0]
        yield PrivateServices(directory, env)
    finally:
        _services_sh("stop", directory)


class UseDatabase:
    """A database router sending every model to one alias."""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def db_for_read(self, model: type, **hints: Any) -> str:
        return self.alias

    def db_for_write(self, model: type, **hints: Any) -> str:
        return self.alias


@contextlib.contextmanager
def own_database(url: str, alias: str = "faults") -> Iterator[str]:
    """This process's ORM on ``url``: registered as ``alias``, every model routed there, so the
    harness's checks (``wait_terminal``, ``assert_transcript_integrity``) read that database."""
    configured = connections.configure_settings(
        {DEFAULT_DB_ALIAS: {}, alias: dj_database_url.parse(url)}
    )
    connections.settings[alias] = configured[alias]
    try:
        with override_settings(DATABASE_ROUTERS=[UseDatabase(alias)]):
            yield alias
    finally:
        with contextlib.suppress(Exception):
            connections[alias].close()
        with contextlib.suppress(AttributeError):
            del connections[alias]
        del connections.settings[alias]


def tolerant(probe: Callable[[], T | None]) -> Callable[[], T | None]:
    """``probe`` for :func:`wait_until` while the database may be away: an error is "not yet"."""

    def attempt() -> T | None:
        try:
            return probe()
        except DatabaseError:
            for conn in connections.all(initialized_only=True):
                with contextlib.suppress(Exception):
                    conn.close()
            return None

    return attempt


class ApiSession:
    """One browser profile on the HTTP API (synchronous): session identity, CSRF token."""

    def __init__(self, base_url: str) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=60)
        response = self.http.get("/api/pai/session")
        response.raise_for_status()
        self.csrf = str(response.json()["csrfToken"])

    def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        headers = {"X-CSRFToken": self.csrf}
        return self.http.request(method, f"/api/pai{path}", json=body, headers=headers)

    def create_thread(self, agent: str = "durable") -> str:
        response = self.call("POST", "/threads", {"agent": agent})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def send(self, thread_id: str, text: str, message_id: str | None = None) -> httpx.Response:
        message: dict[str, Any] = {"role": "user", "parts": [{"type": "text", "text": text}]}
        if message_id is not None:
            message["id"] = message_id
        return self.call("POST", f"/threads/{thread_id}/messages", {"message": message})

    def send_retrying(
        self, thread_id: str, text: str, message_id: str, *, timeout: float = 20.0
    ) -> dict[str, Any]:
        """Send, retrying a 503 (the database is away) with the same message id."""
        deadline = time.monotonic() + timeout
        while True:
            response = self.send(thread_id, text, message_id)
            if response.status_code in (200, 202):
                return dict(response.json())
            assert response.status_code == 503, response.text
            assert response.headers.get("Retry-After"), response.headers
            assert time.monotonic() < deadline, f"still 503 after {timeout:.0f}s"
            time.sleep(0.5)

    def messages(self, thread_id: str) -> list[dict[str, Any]]:
        response = self.call("GET", f"/threads/{thread_id}/messages")
        assert response.status_code == 200, response.text
        return list(response.json()["messages"])

    def cookie_header(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.http.cookies.jar)

    def close(self) -> None:
        self.http.close()


def without_times(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(json.dumps(messages))
    for message in out:
        message["metadata"]["pai"].pop("createdAt", None)
        message["metadata"]["pai"].pop("updatedAt", None)
    return out


class ThreadWatcher:
    """A websocket client of one thread that behaves like ``client.js``: it folds every frame
    (:class:`ThreadState`) and, when the connection closes, reconnects with ``since`` = the
    last sequence number it applied. Runs on a thread of its own."""

    def __init__(self, server: DaphneServer, api: ApiSession, thread_id: str) -> None:
        self.url = f"{server.ws_url}/ws/pai/threads/{thread_id}/"
        self.origin = server.url
        self.cookie = api.cookie_header()
        self.thread_id = thread_id
        self.state = ThreadState()
        self.closes: list[str] = []
        self.stray_chunks: list[dict[str, Any]] = []
        self.failure: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._connected = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"watch-{thread_id}", daemon=True)

    def start(self, timeout: float = 20.0) -> ThreadWatcher:
        self._thread.start()
        assert self._connected.wait(timeout), f"no websocket for {self.thread_id}: {self.closes}"
        return self

    def stop(self, *, wait: bool = True) -> None:
        self._stop.set()
        if wait:
            self._thread.join(15)

    def transcript(self) -> list[dict[str, Any]]:
        with self._lock:
            if self.failure is not None:
                told = "".join(traceback.format_exception(self.failure))
                frames = "\n".join(json.dumps(f) for f in self.state.frames[-8:])
                raise AssertionError(
                    f"watcher of {self.thread_id} failed:\n{told}\nlast frames:\n{frames}"
                )
            return self.state.transcript()

    def _apply(self, frame: dict[str, Any]) -> None:
        with self._lock:
            try:
                self.state.apply(frame)
            except AssertionError:
                if frame.get("type") != "generation.message.chunk":
                    raise
                # A chunk that does not continue its message's stream: an execution that lost
                # its lease during a database outage streams on until its next write fails
                # (docs/durability.md). Dropped unapplied; the generation's end brings the
                # stored message.
                self.stray_chunks.append(frame)

    def _watch(self) -> None:
        while not self._stop.is_set():
            url = self.url if self.state.seq is None else f"{self.url}?since={self.state.seq}"
            try:
                with connect(
                    url,
                    origin=Origin(self.origin),
                    additional_headers={"Cookie": self.cookie},
                    max_size=None,
                    open_timeout=10,
                ) as ws:
                    self._connected.set()
                    while not self._stop.is_set():
                        try:
                            raw = ws.recv(timeout=0.5)
                        except TimeoutError:
                            continue
                        self._apply(json.loads(raw))
            except (ConnectionClosed, InvalidHandshake, OSError, TimeoutError) as exc:
                self.closes.append(repr(exc))
                self._stop.wait(0.5)
            except Exception as exc:  # a protocol violation ThreadState asserts on
                with self._lock:
                    self.failure = exc
                return


@dataclass
class FaultStack:
    services: PrivateServices
    server: DaphneServer
    workers: list[CeleryWorker]
    sweeper: SweeperProcess
    api: ApiSession
    concurrency: int
    watchers: list[ThreadWatcher] = field(default_factory=list)

    @property
    def processes(self) -> list[CeleryWorker]:
        return [*self.workers, self.sweeper]

    def logs(self) -> str:
        return f"{logs(self.processes)}\n----- daphne -----\n{self.server.log_text()[-6000:]}"

    def assert_alive(self) -> None:
        for process in self.processes:
            assert process.is_alive(), f"{process.name} exited\n{self.logs()}"
        assert self.server.process is not None and self.server.process.poll() is None, (
            f"daphne exited\n{self.logs()}"
        )

    def wait_until(self, probe: Callable[[], T | None], *, timeout: float, what: str) -> T:
        return wait_until(tolerant(probe), timeout=timeout, what=what, workers=self.processes)

    def watched_thread(self) -> str:
        """A new thread of the durable agent, with a websocket client watching it."""
        thread_id = self.api.create_thread()
        self.watchers.append(ThreadWatcher(self.server, self.api, thread_id).start())
        return thread_id


@contextlib.contextmanager
def fault_stack(
    directory: Path,
    *,
    lease_seconds: float,
    sweep_seconds: float = 1.0,
    concurrency: int = 4,
) -> Iterator[FaultStack]:
    """Own PostgreSQL + Redis, daphne, two Celery workers (threads pool) and
    ``pai_recover --loop``, all as the docs recommend running them; this process's ORM reads
    the stack's database. Requires the suite's services (skips or fails like them)."""
    if not os.environ.get("PAI_TEST_POSTGRES_URL") or not os.environ.get("PAI_TEST_REDIS_URL"):
        if os.environ.get("PAI_REQUIRE_SERVICES") == "1":
            pytest.fail("fault tests need PostgreSQL and Redis (scripts/test starts them)")
        pytest.skip("fault tests need PostgreSQL and Redis (scripts/test starts them)")
    with private_services(directory / "services") as services, own_database(services.postgres_url):
        lease = {"PAI_TEST_LEASE_SECONDS": f"{lease_seconds:g}"}
        server = DaphneServer(
            database_url=services.postgres_url,
            log_path=directory / "daphne.log",
            env={
                "DJANGO_SETTINGS_MODULE": "tests.support.durable_settings",
                "REDIS_URL": services.redis_url,
                "PAI_LOG_LEVEL": "INFO",
                **lease,
            },
        )
        workers: list[CeleryWorker] = []
        sweeper: SweeperProcess | None = None
        stack: FaultStack | None = None
        try:
            with ThreadPoolExecutor(1) as pool:  # workers boot while the schema is created
                migrated = pool.submit(server.migrate)
                workers = start_workers(
                    2,
                    redis_url=services.redis_url,
                    log_dir=directory,
                    concurrency=concurrency,
                    DATABASE_URL=services.postgres_url,
                    **lease,
                )
                migrated.result()
            sweeper = SweeperProcess(
                env=workers[0].env, interval=sweep_seconds, log_path=directory / "sweeper.log"
            )
            sweeper.start()
            server.start(timeout=60)
            sweeper.wait_ready(timeout=60)
            stack = FaultStack(
                services, server, workers, sweeper, ApiSession(server.url), concurrency
            )
            yield stack
        finally:
            if stack is not None:
                for watcher in stack.watchers:
                    watcher.stop(wait=False)
                for watcher in stack.watchers:
                    watcher.stop()
                stack.api.close()
            _stop_all(server, [*workers, *([sweeper] if sweeper else [])], directory.name)


def _stop_all(server: DaphneServer, processes: list[CeleryWorker], name: str) -> None:
    """Stop everything at once (each warm shutdown takes seconds), then keep the logs."""
    with ThreadPoolExecutor(len(processes) + 1) as pool:
        list(pool.map(lambda stop: stop(), [server.stop, *(p.stop for p in processes)]))
    artifacts = os.environ.get("PAI_ARTIFACTS_DIR")
    if not artifacts:
        return
    for process in processes:
        process.save_log(artifacts, f"faults-{name}-{process.name.split('@')[0]}.log")
    target = Path(artifacts) / "servers" / f"faults-{name}-daphne.log"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(server.log_text(), encoding="utf-8")
