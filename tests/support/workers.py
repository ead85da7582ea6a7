"""Real Celery worker processes for integration tests.

:class:`CeleryWorker` starts ``python -m celery -A pai_project worker`` as a subprocess (in its
own session, so signals reach only it), waits until it logs that it is ready, and stops it
with SIGTERM then SIGKILL. The :class:`subprocess.Popen` handle stays public (``.process``)
so tests can SIGKILL or SIGSTOP a worker mid-run; :meth:`CeleryWorker.kill`,
:meth:`CeleryWorker.pause` and :meth:`CeleryWorker.resume` do that.

The worker's output goes to a log file (never a pipe, which could fill up and block the
worker); :meth:`CeleryWorker.log_text` reads it, and failures include it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import kombu.pools

REPO_ROOT = Path(__file__).resolve().parents[2]

# Variables of the developer's environment that would change what the worker runs.
_SCRUBBED_ENV = (
    "DATABASE_URL",
    "REDIS_URL",
    "PAI_EXECUTOR",
    "PAI_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "DJANGO_SETTINGS_MODULE",
)


def database_url_from_settings(settings_dict: Mapping[str, Any]) -> str:
    """A DATABASE_URL for ``dj_database_url`` that reaches the same database as ``settings_dict``.

    Use ``django.db.connection.settings_dict`` inside a test: its NAME is then pytest-django's
    test database (e.g. ``test_pai``), which is what a worker process must use.
    """
    engine = settings_dict["ENGINE"]
    if "postgresql" in engine:
        user = quote(str(settings_dict.get("USER") or ""), safe="")
        password = quote(str(settings_dict.get("PASSWORD") or ""), safe="")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        host = settings_dict.get("HOST") or "localhost"
        port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
        return f"postgres://{auth}{host}{port}/{quote(str(settings_dict['NAME']), safe='')}"
    if "sqlite" in engine:
        name = str(settings_dict["NAME"])
        if name == ":memory:" or name.startswith("file:"):
            raise ValueError(
                "an in-memory SQLite test database cannot be shared with another process"
            )
        return f"sqlite:///{name}"
    raise ValueError(f"unsupported database engine {engine!r}")


def worker_env(*, database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of a worker: this process's, minus the developer's service choices."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    env.update(
        DJANGO_SETTINGS_MODULE="pai_project.settings",
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        PAI_EXECUTOR="celery",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


class CeleryWorker:
    """One ``celery worker`` subprocess: ``start``, ``wait_ready``, ``stop``, ``log_text``."""

    READY_MARKER = "ready."

    def __init__(
        self,
        *,
        env: Mapping[str, str],
        app: str = "pai_project",
        pool: str = "threads",
        concurrency: int = 4,
        loglevel: str = "info",
        name: str | None = None,
        log_path: Path | None = None,
        extra_args: Sequence[str] = (),
        cwd: Path = REPO_ROOT,
    ) -> None:
        self.env = dict(env)
        self.cwd = cwd
        self.name = name or f"pai-test-{uuid.uuid4().hex[:8]}@%h"
        self.argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            app,
            "worker",
            "--pool",
            pool,
            "--concurrency",
            str(concurrency),
            "-l",
            loglevel,
            "-n",
            self.name,
            # No cluster chatter: tests start one worker at a time and want fast startup.
            "--without-gossip",
            "--without-mingle",
            *extra_args,
        ]
        if log_path is None:
            handle, raw = tempfile.mkstemp(prefix="celery-worker-", suffix=".log")
            os.close(handle)
            log_path = Path(raw)
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    # -- lifecycle --

    def start(self) -> CeleryWorker:
        if self.process is not None:
            raise RuntimeError("worker already started")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int:
        return self._require().pid

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until the worker logs ``ready.``; AssertionError (with the log) otherwise."""
        process = self._require()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.READY_MARKER in self.log_text():
                return
            if process.poll() is not None:
                raise AssertionError(
                    f"celery worker exited with code {process.returncode} before it was ready\n"
                    f"{self._log_excerpt()}"
                )
            time.sleep(0.1)
        raise AssertionError(f"celery worker not ready after {timeout:.0f}s\n{self._log_excerpt()}")

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (a warm shutdown), then SIGKILL after ``timeout``; returns the exit code."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            self._signal(signal.SIGCONT)  # a paused worker cannot handle SIGTERM
            self._signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                process.wait(10)
        return process.returncode

    # -- fault injection --

    def kill(self) -> None:
        """SIGKILL the worker (and its session) and reap it: a crash mid-run."""
        self._signal(signal.SIGKILL)
        self._require().wait(10)

    def pause(self) -> None:
        """SIGSTOP: the worker freezes (a long GC pause, a stalled VM)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, signum: int) -> None:
        process = self._require()
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)  # the whole session: the pool's children too

    # -- logs --

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def _log_excerpt(self, lines: int = 200) -> str:
        text = self.log_text().splitlines()[-lines:]
        return "----- celery worker log -----\n" + "\n".join(text) + "\n----- end of log -----"

    def save_log(
        self, directory: str | os.PathLike[str] | None, filename: str = "celery-worker.log"
    ) -> Path | None:
        """Copy the log into ``directory`` (e.g. ``$PAI_ARTIFACTS_DIR``) when it is set."""
        if not directory:
            return None
        target = Path(directory) / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self.log_text(), encoding="utf-8")
        return target

    def _require(self) -> subprocess.Popen[bytes]:
        if self.process is None:
            raise RuntimeError("worker not started")
        return self.process

    # -- context manager --

    def __enter__(self) -> CeleryWorker:
        if self.process is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextlib.contextmanager
def celery_broker(app: Any, broker_url: str) -> Iterator[None]:
    """Point ``app`` (e.g. ``pai_project.celery.app``) at ``broker_url``, restoring it after.

    Drops the app's cached connection and producer pools on both sides, so no connection to
    the previous broker is reused.
    """

    def reset_pools() -> None:
        pool = app._pool
        app._pool = None
        amqp = app.__dict__.get("amqp")
        if amqp is not None:
            amqp._producer_pool = None
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.force_close_all()
        # kombu also keeps process-wide pools per broker URL: a closed one registered there
        # fails the next use with "Acquire on closed pool".
        kombu.pools.reset()

    previous = app.conf.broker_url
    reset_pools()
    app.conf.broker_url = broker_url
    try:
        yield
    finally:
        reset_pools()
        app.conf.broker_url = previous


class SweeperProcess(CeleryWorker):
    """``manage.py pai_recover --loop SECONDS``: the sweeper daemon, managed like a worker
    (own session, log file, SIGTERM then SIGKILL); ready once it logs its first line."""

    READY_MARKER = "sweeping every"

    def __init__(
        self,
        *,
        env: Mapping[str, str],
        interval: float = 1.0,
        log_path: Path | None = None,
        cwd: Path = REPO_ROOT,
    ) -> None:
        super().__init__(env=env, log_path=log_path, cwd=cwd)
        self.name = "sweeper"
        self.argv = [sys.executable, "manage.py", "pai_recover", "--loop", f"{interval:g}"]
