"""Golden recordings: each scenario through each transport, compared with tests/golden/data.

What a client sees is pinned whole: the websocket frames (snapshot, acks, every event with
its sequence number and chunk), the SSE lines of the AI SDK endpoint, the HTTP responses of
the requests that drove it, ``pai_chat --jsonl``'s lines, and the thread as the HTTP API
returns it afterwards. See README.md for what is normalized and how to regenerate the files.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.golden.cli import CLI_TEXTS, run_pai_chat
from tests.golden.golden_files import check_golden
from tests.golden.normalize import Normalizer
from tests.golden.recorder import Gates, Observer
from tests.golden.scenarios import SCENARIOS, Session, stored
from tests.support.server import Browser, DaphneServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# The thread title every scenario starts with.
TITLE = "Golden"
RUNS = [(name, transport) for name, (*_, ways) in SCENARIOS.items() for transport in ways]


async def record(server: DaphneServer, gates: Gates, scenario: str, transport: str) -> Any:
    agent, run, _ = SCENARIOS[scenario]
    async with Browser(server) as browser:
        thread_id = await browser.create_thread(agent, TITLE)
        async with Observer.connect(browser, thread_id) as observer:
            session = Session(browser, thread_id, gates, observer, transport)
            await run(session)
            await session.settle()  # each step settles; this guards a step that forgot to
            frames = list(observer.frames)
        thread = await stored(browser, thread_id)
    recording: dict[str, Any] = {"scenario": scenario, "transport": transport}
    recording["websocket"] = frames
    if session.http:
        recording["http"] = session.http
    if session.sse:
        recording["sse"] = session.sse
    recording["stored"] = thread
    return Normalizer()(recording)


@pytest.mark.parametrize(("scenario", "transport"), RUNS)
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
    agent = SCENARIOS[scenario][0]
    async with Browser(server) as browser:
        thread_id = await browser.create_thread(agent, TITLE)
        cli = await run_pai_chat(server, gates, browser, thread_id, scenario)
        thread = await stored(browser, thread_id)
    recording = {"scenario": scenario, "transport": "cli", "cli": cli, "stored": thread}
    check_golden(f"{scenario}.cli", Normalizer()(recording))
