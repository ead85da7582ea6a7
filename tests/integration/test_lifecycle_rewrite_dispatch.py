"""history_rewritten delivery on the ORM: serial per thread, bounded across threads (LC-065)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from pai_agents import ScriptedModel, define_agent
from pai_agents.engine.rewrites import dispatcher
from pai_threads import services
from pai_threads.execution import registry
from pai_threads.identity import Identity
from pai_threads.models import Message

pytestmark = pytest.mark.django_db(transaction=True)


class Deliveries:
    """Records each history_rewritten call's enter/exit, per thread and overall."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: dict[str, int] = {}
        self.running = 0
        self.peak = 0
        self.overlaps: list[str] = []
        self.versions: dict[str, list[int]] = {}

    def history_rewritten(self, input: Any) -> None:
        with self.lock:
            self.active[input.thread_id] = self.active.get(input.thread_id, 0) + 1
            if self.active[input.thread_id] > 1:
                self.overlaps.append(input.thread_id)
            self.running += 1
            self.peak = max(self.peak, self.running)
        time.sleep(0.05)
        with self.lock:
            self.versions.setdefault(input.thread_id, []).append(input.rewrite.after_version)
            self.active[input.thread_id] -= 1
            self.running -= 1


@pytest.fixture
def deliveries(monkeypatch: pytest.MonkeyPatch) -> Deliveries:
    recorder = Deliveries()
    agent = define_agent(
        "rewrite-dispatch",
        instructions="x",
        model=ScriptedModel(steps=[]),
        lifecycle={"history_rewritten": recorder.history_rewritten},
    )
    agents = {**registry.agents(), agent.name: agent}
    monkeypatch.setattr(registry, "agents", lambda: agents)
    return recorder


def test_lc_065_history_rewritten_never_overlaps_per_thread_and_is_bounded(
    alice: Identity, deliveries: Deliveries
) -> None:
    """LC-065, LC-062: trusted visibility rewrites on six threads, three each, back to
    back: calls for one thread never overlap and arrive in commit order; across threads
    they run concurrently, at most the dispatcher's worker count at once."""
    threads = []
    for _ in range(6):
        thread = services.create_thread(alice, agent="rewrite-dispatch")
        Message.objects.create(
            message_id="m1",
            thread=thread,
            scope_key=thread.scope_key,
            role="user",
            parts=[{"type": "text", "text": "hi"}],
            producer=Message.Producer.SEND,
        )
        threads.append(thread)
    for round_ in range(3):
        for thread in threads:
            done = services.update_visibility(
                alice, thread.id, {"m1": {"context": round_ % 2 == 1}}
            )
            assert done is not None
    assert dispatcher().wait_idle(timeout=30)

    assert deliveries.overlaps == []
    assert {t.id: deliveries.versions.get(t.id) for t in threads} == {
        t.id: [2, 3, 4] for t in threads
    }
    assert 1 < deliveries.peak <= 4  # the process-wide RewriteDispatcher's max_workers
