"""A real daphne server in a subprocess, and a browser-like HTTP/websocket client for it.

:class:`DaphneServer` serves ``pai_project.asgi`` on a free loopback port with the test
settings (:mod:`tests.support.settings`) against the database given as ``DATABASE_URL``
(normally pytest-django's test database, so tests can read the rows the server writes).
:class:`Browser` is one browser profile: its own cookie jar (session identity), CSRF token,
and websocket connections carrying the cookies and an allowed Origin.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

REPO_ROOT = Path(__file__).resolve().parents[2]

_SCRUBBED_ENV = (
    "DATABASE_URL",
    "REDIS_URL",
    "PAI_EXECUTOR",
    "PAI_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "DJANGO_SETTINGS_MODULE",
    "PAI_TEST_CHANNEL_CAPACITY",
    "PAI_TEST_REALTIME_REDIS_URL",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class DaphneServer:
    def __init__(
        self, *, database_url: str, log_path: Path | None = None, env: Mapping[str, str] = {}
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        self.env.update(
            DJANGO_SETTINGS_MODULE="tests.support.settings",
            DATABASE_URL=database_url,
            PYTHONUNBUFFERED="1",
            PAI_LOG_LEVEL="WARNING",
        )
        self.env.update(env)
        if log_path is None:
            handle, raw = tempfile.mkstemp(prefix="daphne-", suffix=".log")
            os.close(handle)
            log_path = Path(raw)
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def migrate(self) -> None:
        """Create the schema (for a database of the server's own)."""
        subprocess.run(
            [sys.executable, "-m", "django", "migrate", "--noinput", "-v", "0"],
            cwd=REPO_ROOT,
            env=self.env,
            check=True,
            timeout=120,
        )

    def start(self, timeout: float = 30.0) -> DaphneServer:
        argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port)]
        argv.append("pai_project.asgi:application")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                argv,
                cwd=REPO_ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"daphne exited early\n{self.log_text()[-4000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/api/pai/session", timeout=1).status_code == 200:
                    return self
            time.sleep(0.1)
        self.stop()
        raise AssertionError(f"daphne not ready after {timeout}s\n{self.log_text()[-4000:]}")

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""


class Browser:
    """One browser profile against a server: cookies, CSRF, JSON API and websockets."""

    def __init__(self, server: DaphneServer) -> None:
        self.server = server
        self.http = httpx.AsyncClient(base_url=server.url, timeout=30)
        self.csrf = ""

    async def __aenter__(self) -> Browser:
        response = await self.http.get("/api/pai/session")
        response.raise_for_status()
        self.csrf = response.json()["csrfToken"]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    async def api(self, method: str, path: str, json: Any = None) -> httpx.Response:
        headers = {"X-CSRFToken": self.csrf}
        return await self.http.request(method, f"/api/pai{path}", json=json, headers=headers)

    async def create_thread(self, agent: str = "slow", title: str = "") -> str:
        response = await self.api("POST", "/threads", {"agent": agent, "title": title})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    async def send(self, thread_id: str, text: str) -> dict[str, Any]:
        response = await self.api("POST", f"/threads/{thread_id}/messages", {"text": text})
        assert response.status_code == 202, response.text
        return dict(response.json())

    async def messages(self, thread_id: str) -> list[dict[str, Any]]:
        response = await self.api("GET", f"/threads/{thread_id}/messages")
        assert response.status_code == 200, response.text
        return list(response.json()["messages"])

    async def wait_run(self, run_id: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            run = (await self.api("GET", f"/runs/{run_id}")).json()
            if run["status"] not in ("queued", "running"):
                return dict(run)
            if time.monotonic() > deadline:
                raise AssertionError(f"run {run_id} still {run['status']}")
            await _sleep(0.05)

    def cookie_header(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.http.cookies.jar)

    @contextlib.asynccontextmanager
    async def websocket(
        self, thread_id: str, *, since: int | None = None
    ) -> AsyncIterator[ClientConnection]:
        url = f"{self.server.ws_url}/ws/pai/threads/{thread_id}/"
        if since is not None:
            url += f"?since={since}"
        async with connect(
            url,
            origin=self.server.url,  # type: ignore[arg-type]
            additional_headers={"Cookie": self.cookie_header()},
            max_size=None,
        ) as ws:
            yield ws


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)
