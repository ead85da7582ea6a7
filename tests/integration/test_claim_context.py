"""The context read with the claim (issue 16): one thread hop fewer per run, never stale.

The engine's first store call after a claim is ``load_context`` unless ``prepare_run`` runs
in between; then the claim reads the context in its own hop and the first load returns it.
Any other store call first drops it, so a write is never hidden from the next load.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings

from benchmarks.agents import w1_agent, w1_lifecycle_agent
from pai_threads.execution.execute import context_follows_claim
from pai_threads.store.db import StoreThreads, swap_store_threads
from pai_threads.store.thread_store import ORMThreadStore
from tests.support.step_commits import only_step

pytestmark = pytest.mark.django_db(transaction=True)


class CountingThreads(StoreThreads):
    def __init__(self) -> None:
        super().__init__(1, name="pai-store-counted")
        self.calls: list[str] = []

    async def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(fn.__name__)
        return await super().run(fn, *args, **kwargs)


@pytest.fixture
def counted() -> Any:
    threads = CountingThreads()
    previous = swap_store_threads(threads)
    yield threads
    swap_store_threads(previous)
    threads.stop()


def test_only_an_agent_without_prepare_run_reads_its_context_with_the_claim() -> None:
    agents = [w1_agent, w1_lifecycle_agent]
    with override_settings(PAI={**settings.PAI, "AGENTS": agents}):
        assert context_follows_claim(w1_agent.name) is True
        assert context_follows_claim(w1_lifecycle_agent.name) is False  # prepare_run may write
        assert context_follows_claim("no-such-agent") is False


def test_the_first_load_after_the_claim_needs_no_thread_hop(
    counted: CountingThreads, queued_w1_run: str
) -> None:
    store = ORMThreadStore(context_on_claim=lambda name: True)

    async def go() -> tuple[list[Any], list[Any]]:
        claim = await store.claim_run(queued_w1_run, owner="test", lease_seconds=30)
        first = await store.load_context(claim.lease)
        second = await store.load_context(claim.lease)
        return first, second

    first, second = asyncio.run(go())
    assert counted.calls == ["claim_run_sync", "load_context_sync"]  # the second load reads
    assert first == second
    assert [m["role"] for m in first] == ["user"]


def test_a_write_before_the_first_load_drops_the_claimed_context(
    counted: CountingThreads, queued_w1_run: str
) -> None:
    store = ORMThreadStore(context_on_claim=lambda name: True)
    answer: dict[str, Any] = {
        "id": "msg_claim_context_answer",
        "role": "assistant",
        "parts": [{"type": "text", "text": "hi"}],
    }
    step = only_step(answer["id"])

    async def go() -> list[Any]:
        claim = await store.claim_run(queued_w1_run, owner="test", lease_seconds=30)
        await store.commit_step(claim.lease, message=answer, step=step)  # type: ignore[arg-type]
        return await store.load_context(claim.lease)

    context = asyncio.run(go())
    assert [m["id"] for m in context][-1] == answer["id"]
    # On PostgreSQL the step's one statement goes on the loop's own connection, no hop.
    commit = [] if connection.vendor == "postgresql" else ["commit_step_sync"]
    assert counted.calls == ["claim_run_sync", *commit, "load_context_sync"]
