"""A redis-server of a test's own, on a free loopback port, that the test may restart.

Tests that restart Redis must never touch the shared server (``PAI_TEST_REDIS_URL``, used
by other tests at the same time): :class:`PrivateRedis` starts ``redis-server`` as a child
process without persistence, so a restart comes back empty on the same port, as the
production fault did ("down 5 s, back empty").
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from tests.support.server import free_port

__all__ = ["PrivateRedis"]


class PrivateRedis:
    def __init__(self, directory: Path) -> None:
        executable = shutil.which("redis-server")
        if executable is None:
            pytest.skip("needs redis-server on PATH (scripts/services.sh installs it)")
        self.executable = executable
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 15.0) -> PrivateRedis:
        self.directory.mkdir(parents=True, exist_ok=True)
        argv = [self.executable, "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--save", "", "--appendonly", "no", "--dir", str(self.directory)]
        with (self.directory / "redis.log").open("ab") as log:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while not self.ping():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"redis-server did not start on port {self.port}")
            time.sleep(0.05)
        return self

    def ping(self) -> bool:
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)  # no persistence configured: nothing is saved
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait(10)

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)
