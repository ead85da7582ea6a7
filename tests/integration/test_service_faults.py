"""Acceptance (issue 15): the stack keeps running through a Redis or a PostgreSQL restart.

Daphne, two Celery workers (threads pool) and ``pai_recover --loop``, as docs/operations.md
recommends, on this test's own PostgreSQL and Redis (tests.support.faults), with a websocket
client per thread. One service goes down for about five seconds while runs stream: Redis comes
back empty on the same port; PostgreSQL stops with a fast shutdown (every session is cut). A
worker whose writes fail, the failure write included, leaves its run ``running``; once the
lease expires the sweeper hands it to a worker like any crashed run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from pai_threads.models import Message, Run, Step
from tests.support.durable_harness import TERMINAL, assert_transcript_integrity
from tests.support.faults import FaultStack, ThreadWatcher, fault_stack, without_times
from tests.support.workers import CeleryWorker

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.redis]

LEASE_SECONDS = 8.0
OUTAGE_SECONDS = 5.0
DATABASE_ERRORS = frozenset({"OperationalError", "InterfaceError"})


@pytest.fixture
def stack(tmp_path: Path, django_db_blocker: Any) -> Iterator[FaultStack]:
    with django_db_blocker.unblock(), fault_stack(tmp_path, lease_seconds=LEASE_SECONDS) as built:
        yield built


def run_of(response: httpx.Response) -> str:
    """The run id of a send the API accepted (202)."""
    assert response.status_code == 202, response.text
    return str(response.json()["run"]["id"])


def start_wave(stack: FaultStack, texts: list[str]) -> tuple[list[str], list[str]]:
    """A thread per text, each with a websocket watcher, then the sends: (threads, runs)."""
    threads = [stack.watched_thread() for _ in texts]
    runs = [run_of(stack.api.send(t, text)) for t, text in zip(threads, texts, strict=True)]
    return threads, runs


def wait_streaming(stack: FaultStack, run_ids: list[str]) -> None:
    """Until every run is executing past its first checkpoint (or inside its tool call)."""

    def probe() -> bool:
        return all(
            Message.objects.filter(run_id=run_id, role="assistant").exists() for run_id in run_ids
        )

    stack.wait_until(probe, timeout=30, what="every run to stream its answer")


def wait_started(stack: FaultStack, run_id: str, *, within: float) -> None:
    """Until ``run_id`` is claimed by a worker (running, or already done)."""

    def probe() -> bool:
        return Run.objects.get(pk=run_id).status != Run.Status.QUEUED

    stack.wait_until(probe, timeout=within, what=f"run {run_id} to start")


def wait_all_terminal(stack: FaultStack, run_ids: list[str], *, timeout: float) -> list[Run]:
    def probe() -> list[Run] | None:
        runs = list(Run.objects.filter(pk__in=run_ids))
        return runs if all(run.status in TERMINAL for run in runs) else None

    def states() -> str:
        return ", ".join(f"{r.id} {r.status}" for r in Run.objects.filter(pk__in=run_ids))

    try:
        return stack.wait_until(probe, timeout=timeout, what="every run to end")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nruns: {states()}") from None


def assert_executed_once(runs: list[Run]) -> None:
    """No duplicate: one message per step and per id, nothing left open, a Step row per
    completed step (re-executing a step replaces its message, never adds one)."""
    for thread_id in {run.thread_id for run in runs}:
        assert_transcript_integrity(thread_id)
    for run in runs:
        steps = sorted(Step.objects.filter(run=run).values_list("index", flat=True))
        if run.status == Run.Status.COMPLETED:
            assert steps == list(range(run.step_count)), (run.id, steps, run.step_count)


def assert_new_work_on_every_worker(stack: FaultStack) -> None:
    """More runs at once than one worker takes (its concurrency): every worker executes some."""
    count = stack.concurrency * len(stack.workers) - 1
    _threads, runs = start_wave(stack, ["stream 1"] * count)
    for run in wait_all_terminal(stack, runs, timeout=60):
        assert run.status == Run.Status.COMPLETED, (run.id, run.status, run.error)
    for worker in stack.workers:

        def executed(worker: CeleryWorker = worker) -> bool:
            return any(run_id in worker.log_text() for run_id in runs)

        stack.wait_until(executed, timeout=10, what=f"{worker.name} to execute a new run")


def assert_watchers_match_store(stack: FaultStack) -> None:
    """Every websocket client ends with exactly the stored messages of its thread."""
    for watcher in stack.watchers:
        stored = without_times(stack.api.messages(watcher.thread_id))

        def caught_up(watcher: ThreadWatcher = watcher, stored: Any = stored) -> bool:
            return bool(watcher.transcript() == stored)

        stack.wait_until(
            caught_up,
            timeout=20,
            what=f"the websocket client of {watcher.thread_id} to show the stored messages "
            f"(closes: {watcher.closes[-5:]}, stray chunks: {len(watcher.stray_chunks)})",
        )


def _outage_starts(stack: FaultStack, service: str, effects: Path) -> tuple[list[str], float]:
    """Five streaming runs and one in a tool call, then ``service`` goes down."""
    _threads, runs = start_wave(stack, [*["stream 8"] * 5, f"tool 3 {effects}"])
    wait_streaming(stack, runs)
    stack.services.down(service)
    return runs, time.monotonic()


def _outage_ends(stack: FaultStack, service: str, down_at: float) -> None:
    time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_at)))
    stack.services.up(service)


def _tool_starts(effects: Path) -> list[str]:
    lines = effects.read_text().splitlines() if effects.exists() else []
    return [line for line in lines if line.startswith("start")]


def _assert_stack_recovered(stack: FaultStack) -> None:
    """Every process alive, every worker taking new runs, every client showing the store."""
    stack.assert_alive()
    for worker in stack.workers:
        assert "Unrecoverable error" not in worker.log_text(), worker.log_text()[-4000:]
    assert_new_work_on_every_worker(stack)
    assert_watchers_match_store(stack)
    stack.assert_alive()


def test_a_redis_restart_loses_no_run_and_stops_no_process(
    stack: FaultStack, tmp_path: Path
) -> None:
    effects = tmp_path / "tool-effects.log"
    spare = [stack.watched_thread() for _ in range(3)]
    runs, down_at = _outage_starts(stack, "redis", effects)
    # A send during the outage is stored and answered as usual (its run is dispatched when
    # Redis is back); a retry with the same message id returns the same message and run.
    during = []
    for index, thread_id in enumerate(spare[:2]):
        text, message_id = f"sent during the outage {index}", f"outage-{index}"
        run_id = run_of(stack.api.send(thread_id, text, message_id))
        again = stack.api.send(thread_id, text, message_id)
        assert again.status_code == 200, again.text
        assert again.json()["created"] is False and again.json()["run"]["id"] == run_id
        during.append(run_id)
    _outage_ends(stack, "redis", down_at)

    # Acceptance: a message sent right after Redis is back starts within the lease period.
    fresh = run_of(stack.api.send(spare[2], "sent after the outage"))
    wait_started(stack, fresh, within=LEASE_SECONDS)

    ended = wait_all_terminal(stack, [*runs, *during, fresh], timeout=60)
    for run in ended:
        assert run.status == Run.Status.COMPLETED, (run.id, run.status, run.error)
    # Runs in flight kept their worker: a broker outage is no reason for a takeover.
    assert {run.attempt for run in ended if run.id in runs} == {1}
    assert_executed_once(ended)
    assert len(_tool_starts(effects)) == 1
    _assert_stack_recovered(stack)


def test_a_postgres_restart_loses_no_run_and_stops_no_process(
    stack: FaultStack, tmp_path: Path
) -> None:
    effects = tmp_path / "tool-effects.log"
    spare = [stack.watched_thread() for _ in range(2)]
    runs, down_at = _outage_starts(stack, "postgres", effects)
    with ThreadPoolExecutor(1) as pool:
        # A send while the database is away (it may wait for a pooled connection).
        during = pool.submit(stack.api.send, spare[0], "sent during the outage", "pg-outage")
        _outage_ends(stack, "postgres", down_at)
        first = during.result(timeout=90)
    # Never a 500: a typed 503 with a retry hint (nothing stored), or stored if the
    # database came back while the request waited for a connection.
    assert first.status_code in (202, 503), first.text
    if first.status_code == 503:
        assert first.json()["error"]["code"] == "service_unavailable", first.text
        assert first.headers.get("Retry-After"), first.headers

    # Acceptance: a message sent right after the database is back starts within the lease.
    fresh = stack.api.send_retrying(spare[1], "sent after the outage", "pg-fresh")["run"]["id"]
    wait_started(stack, fresh, within=LEASE_SECONDS)
    # Retrying the outage send with its message id stores it once.
    retried = stack.api.send_retrying(spare[0], "sent during the outage", "pg-outage")
    if first.status_code == 202:
        assert retried["created"] is False
        assert retried["run"]["id"] == first.json()["run"]["id"]

    ended = wait_all_terminal(stack, [*runs, retried["run"]["id"], fresh], timeout=80)
    for run in ended:
        # A run in flight completes, taken over if its lease expired during the outage; it
        # may only fail if the database error reached its step (the run loop's choice).
        in_flight_failure = run.id in runs and (run.error or {}).get("type") in DATABASE_ERRORS
        assert run.status == Run.Status.COMPLETED or in_flight_failure, (run.id, run.status)
    assert_executed_once(ended)
    # The tool ran at most once, however often its run was interrupted and taken over.
    assert len(_tool_starts(effects)) <= 1
    _assert_stack_recovered(stack)
