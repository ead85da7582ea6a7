"""Acceptance (issue 13, point 4): an MCP tool call survives a SIGKILL of a real Celery
worker mid-call with the same guarantees as a local tool.

Real ``celery worker`` processes (tests.support.mcp_settings: 3 s leases) on the PostgreSQL
test database and Redis db 12; the test MCP server (tests/support/mcp_server.py) records
every call when it starts and blocks ``slow`` until the test releases it. The worker
executing the call is killed; the sweeper re-dispatches the run; the other worker lists the
tools again and settles the cut-off call exactly as it settles a local non-idempotent tool's
(tests/integration/test_durable_recovery.py): a model-visible recovery error, not re-sent.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from pai_agents.engine.tool_calls import settle_chunk
from pai_threads import services
from pai_threads.execution.recovery import recover_runs
from pai_threads.identity import Identity
from pai_threads.models import Run
from tests.support import mcp_settings
from tests.support.durable_harness import (
    assert_transcript_integrity,
    celery_dispatch,
    logs,
    stop_workers,
    text_of,
    tool_parts,
    wait_terminal,
    wait_until,
)
from tests.support.mcp_fixtures import HttpMCPServer, calls, release
from tests.support.workers import CeleryWorker, database_url_from_settings, worker_env

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.redis,
    pytest.mark.django_db(transaction=True),
]

IDENTITY = Identity(scope_key="test:mcp-crash", data={"userId": "mcp"})


@pytest.fixture
def state(tmp_path: Path) -> Path:
    path = tmp_path / "mcp-state"
    path.mkdir()
    return path


@pytest.fixture
def mcp_url(state: Path) -> Iterator[str]:
    with HttpMCPServer(state) as url:
        yield url


@pytest.fixture
def fleet(
    transactional_db: None, redis_url: str, tmp_path: Path, state: Path, mcp_url: str
) -> Iterator[list[CeleryWorker]]:
    """Two idle workers (concurrency 1) on Redis db 12, this process dispatching to them."""
    broker = f"{redis_url.rsplit('/', 1)[0]}/12"
    env = worker_env(
        database_url=database_url_from_settings(connection.settings_dict),
        redis_url=broker,
        DJANGO_SETTINGS_MODULE="tests.support.mcp_settings",
        PAI_TEST_MCP_URL=mcp_url,
        PAI_MCP_STATE_DIR=str(state),
    )
    workers = [
        CeleryWorker(
            env=env,
            concurrency=1,
            name=f"mcp-{i}-{os.getpid()}@%h",
            log_path=tmp_path / f"worker-{i}.log",
        )
        for i in range(2)
    ]
    with (
        celery_dispatch(broker),
        override_settings(PAI={**settings.PAI, "AGENTS": mcp_settings.PAI["AGENTS"]}),
    ):
        for worker in workers:
            worker.start()
        try:
            for worker in workers:
                worker.wait_ready(timeout=60)
            yield workers
        finally:
            stop_workers(workers)


def _owner(run_id: str, workers: list[CeleryWorker]) -> CeleryWorker:
    def probe() -> CeleryWorker | None:
        run = Run.objects.get(pk=run_id)
        if run.status != Run.Status.RUNNING or not run.lease_owner:
            return None
        pid = int(run.lease_owner.split(":")[1])
        return next((w for w in workers if w.pid == pid), None)

    return wait_until(probe, timeout=20, what=f"a worker to claim {run_id}", workers=workers)


@pytest.mark.parametrize("agent", ["mcp_http", "mcp_stdio"])
def test_sigkill_during_an_mcp_call_settles_it_once_as_a_recovery_error(
    fleet: list[CeleryWorker], state: Path, agent: str
) -> None:
    thread = services.create_thread(IDENTITY, agent=agent)
    sent = services.send(IDENTITY, thread.id, {"parts": [{"type": "text", "text": "k1"}]})
    assert sent.run is not None
    run_id = sent.run.id
    victim = _owner(run_id, fleet)
    wait_until(
        lambda: (state / "started-k1").exists(),
        timeout=20,
        what="the MCP call to start",
        workers=fleet,
    )
    victim.kill()
    wait_until(
        lambda: Run.objects.filter(
            pk=run_id, status=Run.Status.RUNNING, lease_expires_at__lt=timezone.now()
        ).first(),
        timeout=15,
        what="the dead worker's lease to expire",
        workers=fleet,
    )
    assert run_id in recover_runs()
    try:
        run = wait_terminal(run_id, timeout=40, workers=fleet)
    finally:
        release(state, "k1")  # let the HTTP server's cut-off handler finish
    assert run.status == Run.Status.COMPLETED, f"{run.status} {run.error}\n{logs(fleet)}"

    # At most once: the MCP server saw exactly one call, the one the dead worker sent.
    assert calls(state) == [{"tool": "slow", "arguments": {"tag": "k1"}}]
    rows = assert_transcript_integrity(thread.id)
    assert [(m.role, m.step_index) for m in rows] == [
        ("user", None),
        ("assistant", 0),
        ("assistant", 1),
    ]
    # Settled exactly as a local non-idempotent tool's call is after recovery.
    (call,) = tool_parts(rows[1].parts)
    expected = settle_chunk(call["toolCallId"], "recovery")
    assert call["state"] == "output-error", call
    assert call["errorText"] == expected["errorText"]
    assert call["toolMetadata"] == {"pai": {"source": "recovery"}}
    # The run went on: the model was told the call did not complete.
    assert "was not completed" in text_of(rows[2].parts)
