"""Golden recordings: each scenario through each transport, compared with tests/golden/data.

What a client sees is pinned whole: the websocket frames (snapshot, acks, every event with
its sequence number and chunk), the SSE lines of the AI SDK endpoint, the HTTP responses of
the requests that drove it, and the thread as the HTTP API returns it afterwards. See
README.md for what is normalized and how to regenerate the files.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.golden.cli import CLI_TEXTS, run_pai_chat
from tests.golden.golden_files import check_golden
from tests.golden.normalize import Normalizer
from tests.golden.recorder import Gates, Observer
from tests.golden.scenarios import SCENARIOS, Session
from tests.support.server import Browser, DaphneServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SERVER_TRANSPORTS = ("ws", "http", "sse")
# The thread title every scenario starts with.
TITLE = "Golden"


async def record(server: DaphneServer, gates: Gates, scenario: str, transport: str) -> Any:
    agent, run = SCENARIOS[scenario]
    async with Browser(server) as browser:
        thread_id = await browser.create_thread(agent, TITLE)
        async with Observer.connect(browser, thread_id) as observer:
            session = Session(browser, thread_id, gates, observer, transport)
            await run(session)
            frames = list(observer.frames)
        stored = await session.stored()
    recording: dict[str, Any] = {"scenario": scenario, "transport": transport}
    recording["websocket"] = frames
    if session.http:
        recording["http"] = session.http
    if session.sse:
        recording["sse"] = session.sse
    recording["stored"] = stored
    return Normalizer()(recording)


@pytest.mark.parametrize("transport", SERVER_TRANSPORTS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_scenario_matches_its_golden_recording(
    server: DaphneServer, gates: Gates, scenario: str, transport: str
) -> None:
    check_golden(f"{scenario}.{transport}", await record(server, gates, scenario, transport))


@pytest.mark.parametrize("scenario", list(CLI_TEXTS))
async def test_pai_chat_jsonl_matches_its_golden_recording(
    server: DaphneServer, gates: Gates, scenario: str
) -> None:
    """``pai_chat --jsonl``: the chunk lines, then the run's stored messages; the exit code
    (1 for a run that waits or is cancelled) and the diagnostics on stderr."""
    agent, _ = SCENARIOS[scenario]
    async with Browser(server) as browser:
        thread_id = await browser.create_thread(agent, TITLE)
        cli = await run_pai_chat(server, gates, browser, thread_id, scenario)
        session = Session(browser, thread_id, gates, None, "cli")  # type: ignore[arg-type]
        stored = await session.stored()
    recording = {"scenario": scenario, "transport": "cli", "cli": cli, "stored": stored}
    check_golden(f"{scenario}.cli", Normalizer()(recording))
