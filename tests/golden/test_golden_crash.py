"""Golden recording of crash recovery: the server running a run dies, a new one recovers it.

The run's tool publishes a transient ToolData record and never returns; once the client has
that record, the server is SIGKILLed (its lease stays in the database, ``running``). A new
server starts on the same database, the client reconnects (websocket with ``?since=`` and,
for ``sse``, the resume stream), the test expires the dead lease (in the database: waiting
30 s for it would make the test slow, not different) and an operator asks the admin to
re-dispatch stalled runs. The recovered attempt settles the interrupted call as a recovery
error (the tool is not idempotent) and answers. Everything both connections received, and
the thread afterwards, are compared with data/crash.<transport>.json.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from pai_agents.ids import new_id
from pai_threads.models import Run
from tests.golden.conftest import GOLDEN_SETTINGS
from tests.golden.golden_files import check_golden
from tests.golden.normalize import Normalizer
from tests.golden.recorder import Gates, Observer, SseStream, quiesce, read_sse
from tests.golden.scenarios import stored
from tests.golden.test_golden import TITLE
from tests.support.golden_executor import GATES_ENV
from tests.support.server import Browser, DaphneServer
from tests.support.workers import database_url_from_settings

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

OPERATOR = ("golden-operator", "golden-password")
TOOL_DATA = "data-pai-tool-data"


class Servers:
    """Golden servers started one after another on the test database, each with its gates."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[DaphneServer] = []

    def start(self) -> tuple[DaphneServer, Gates]:
        number = len(self.started) + 1
        gates = Gates(self.tmp_path / f"gates-{number}")
        gates.directory.mkdir()
        logs = Path(os.environ.get("PAI_ARTIFACTS_DIR") or self.tmp_path) / "servers"
        server = DaphneServer(
            database_url=database_url_from_settings(connection.settings_dict),
            log_path=logs / f"golden-crash-{number}.log",
            env={"DJANGO_SETTINGS_MODULE": GOLDEN_SETTINGS, GATES_ENV: str(gates.directory)},
        )
        self.started.append(server)
        return server.start(), gates

    def stop_all(self) -> None:
        for server in self.started:
            server.stop()


@pytest.fixture
def servers(transactional_db: None, tmp_path: Path) -> Iterator[Servers]:
    started = Servers(tmp_path)
    try:
        yield started
    finally:
        started.stop_all()


def crash(server: DaphneServer) -> None:
    """SIGKILL the server's whole process group: no shutdown code runs."""
    assert server.process is not None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(10)


def _expire_lease(run_id: str) -> None:
    past = timezone.now() - timedelta(seconds=1)
    assert Run.objects.filter(pk=run_id, status="running").update(lease_expires_at=past) == 1


def _create_operator() -> None:
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        get_user_model().objects.create_superuser(OPERATOR[0], password=OPERATOR[1])


@contextlib.asynccontextmanager
async def operator(server: DaphneServer) -> AsyncIterator[httpx.AsyncClient]:
    """An operator logged into the server's admin."""
    await sync_to_async(_create_operator)()
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        await client.get("/admin/login/")
        form = {"username": OPERATOR[0], "password": OPERATOR[1], "next": "/admin/"}
        form["csrfmiddlewaretoken"] = client.cookies["csrftoken"]
        response = await client.post("/admin/login/", data=form)
        assert response.status_code == 302, response.text[:500]
        yield client


async def recover_stalled(client: httpx.AsyncClient, run_id: str) -> None:
    """The admin's "Recover the selected stalled runs" action."""
    form = {
        "action": "recover_runs",
        "_selected_action": run_id,
        "index": "0",
        "csrfmiddlewaretoken": client.cookies["csrftoken"],
    }
    response = await client.post("/admin/pai_threads/run/", data=form)
    assert response.status_code == 302, response.text[:500]


def _is_tool_data(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == TOOL_DATA


async def record_crash(servers: Servers, transport: str) -> dict[str, Any]:
    first, gates = servers.start()
    sse: list[dict[str, Any]] = []
    async with Browser(first) as browser:
        thread_id = await browser.create_thread("golden_crash", TITLE)
        async with Observer.connect(browser, thread_id) as before:
            stream: SseStream | None = None
            if transport == "ws":
                await before.command({"type": "send", "text": "Run the report."})
            else:
                text = {"type": "text", "text": "Run the report."}
                message = {"id": new_id("msg"), "role": "user", "parts": [text]}
                body = {"id": thread_id, "messages": [message], "trigger": "submit-message"}
                stream = await read_sse(browser, "POST", "/ai-sdk/chat", body)
            (run_id,) = gates.release_held()
            await before.wait_for(lambda f: f["type"] == "generation.message.chunk"
                                  and _is_tool_data(f["chunk"]))  # fmt: skip
            if stream is not None:
                await stream.read_until(_is_tool_data)
            crash(first)
            await before.closed()
            if stream is not None:
                await stream.read_to_end()
                sse.append(stream.recording("POST /ai-sdk/chat"))
        frames_before, last_seq = list(before.frames), before.last_seq
        cookies = browser.http.cookies

    second, gates = servers.start()
    async with Browser(second) as browser:
        browser.http.cookies.update(cookies)  # the same browser session: the same scope
        async with Observer.connect(browser, thread_id, since=last_seq) as after:
            resumed = None
            if transport == "sse":
                path = f"/ai-sdk/chat/{thread_id}/stream"
                resumed = await read_sse(browser, "GET", path)
                assert resumed.status == 200, resumed.status
            await sync_to_async(_expire_lease)(run_id)
            async with operator(second) as admin:
                await recover_stalled(admin, run_id)
            assert gates.release_held() == [run_id]
            if resumed is not None:
                await resumed.read_until(lambda item: item == "[DONE]")
                await resumed.read_to_end()
                sse.append(resumed.recording(f"GET {path}"))
            await quiesce(browser, thread_id, gates, after)
            frames_after = list(after.frames)
        thread = await stored(browser, thread_id)

    recording: dict[str, Any] = {"scenario": "crash", "transport": transport}
    recording["websocket"] = [
        {"server": "the first, killed after the ToolData record", "frames": frames_before},
        {"server": "the second, connected with ?since", "since": last_seq, "frames": frames_after},
    ]
    if sse:
        recording["sse"] = sse
    recording["stored"] = thread
    return Normalizer()(recording)


@pytest.mark.parametrize("transport", ["ws", "sse"])
async def test_crash_recovery_matches_its_golden_recording(
    servers: Servers, transport: str
) -> None:
    check_golden(f"crash.{transport}", await record_crash(servers, transport))
