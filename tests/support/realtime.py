"""Fixtures and helpers shared by the realtime, AI SDK and e2e tests (daphne on loopback)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from websockets.asyncio.client import ClientConnection

from tests.support.server import DaphneServer
from tests.support.workers import database_url_from_settings

__all__ = ["recv", "recv_until", "redis_realtime", "server_fixture", "start_server"]


def server_fixture(name: str, **env: str) -> Any:
    """A module-scoped ``server`` fixture: :func:`start_server` on pytest-django's test
    database. Use as ``server = server_fixture("name")`` in a test module."""

    @pytest.fixture(scope="module")
    def server(
        request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory,
        django_db_setup: None,
        django_db_blocker: Any,
    ) -> Iterator[DaphneServer]:
        yield from start_server(request, tmp_path_factory, django_db_blocker, name, **env)

    return server


def start_server(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    django_db_blocker: Any,
    name: str,
    **env: str,
) -> Iterator[DaphneServer]:
    """A daphne server, its log kept in ``$PAI_ARTIFACTS_DIR/servers/``.

    With ``django_db_blocker`` it uses pytest-django's test database (tests read its rows);
    with None it gets a migrated SQLite file of its own (for tests that never touch the
    database in-process, such as the Playwright ones).
    """
    own_database = django_db_blocker is None
    if own_database:
        database_url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'server.sqlite3'}"
    else:
        with django_db_blocker.unblock():
            database_url = database_url_from_settings(connection.settings_dict)
    log_dir = Path(os.environ.get("PAI_ARTIFACTS_DIR") or tmp_path_factory.mktemp("logs"))
    # One log per test module (and pass): a module's failure keeps its own server's log.
    module = request.module.__name__.rsplit(".", 1)[-1] if request.module else "session"
    on_postgres = os.environ.get("DATABASE_URL", "").startswith("postgres")
    on_django6 = os.environ.get("VIRTUAL_ENV", "").endswith("-django6")
    passname = "django6" if on_django6 else ("pg" if on_postgres else "")
    stem = "-".join(filter(None, (name, module, passname)))
    server = DaphneServer(
        database_url=database_url, log_path=log_dir / "servers" / f"{stem}.log", env=env
    )
    if own_database:
        server.migrate()
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def recv(ws: ClientConnection, timeout: float = 10.0) -> dict[str, Any]:
    raw = await asyncio.wait_for(ws.recv(), timeout)
    frame = json.loads(raw)
    assert isinstance(frame, dict)
    return frame


async def recv_until(
    ws: ClientConnection,
    done: Callable[[dict[str, Any]], bool],
    *,
    sink: Callable[[dict[str, Any]], None] | None = None,
    timeout: float = 20.0,
) -> list[dict[str, Any]]:
    """Frames up to and including the first one ``done`` accepts."""
    frames: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        frame = await recv(ws, max(0.1, deadline - loop.time()))
        frames.append(frame)
        if sink is not None:
            sink(frame)
        if done(frame):
            return frames


@contextlib.asynccontextmanager
async def redis_realtime(settings: Any, redis_url: str) -> AsyncIterator[None]:
    """This process's replay buffer and channel layer on Redis (PAI's layer), as a server
    started with ``PAI_TEST_REALTIME_REDIS_URL`` has them; closed and forgotten after."""
    from channels.layers import get_channel_layer

    from pai_threads.realtime.buffers import clear_cache, get_buffer
    from pai_threads.realtime.buffers.redis import RedisReplayBuffer

    settings.PAI = {**settings.PAI, "REALTIME_REDIS_URL": redis_url, "REALTIME_BUFFER": "redis"}
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "pai_threads.realtime.redis_layer.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_url]},
        }
    }
    clear_cache()
    try:
        yield
    finally:
        buffer = get_buffer()
        if isinstance(buffer, RedisReplayBuffer):
            await buffer.aclose()
        await get_channel_layer().close_pools()
        clear_cache()
