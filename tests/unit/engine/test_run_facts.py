"""Run facts hooks see across a waiting -> resume boundary (LC-006..LC-008)."""

from __future__ import annotations

import time
from typing import Any

from pai_agents import ScriptedStep
from tests.support.engine_harness import harness


class RunFacts:
    """Records ``input.run`` of every prepare_run and prepare_model_step call."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def prepare_run(self, input: Any) -> None:
        self.seen.append(("prepare_run", input.run))

    def prepare_model_step(self, input: Any) -> None:
        self.seen.append(("prepare_model_step", input.run))


async def test_lc_007_lc_008_run_started_at_is_stable_across_a_resume() -> None:
    """LC-007: run.started_at is the logical run start, identical before and after the
    waiting -> resume boundary. LC-008: execution.started_at is each episode's start: the
    first episode's is the run's, the resume episode's differs; LC-006: initiator stays."""
    facts = RunFacts()
    h = harness(
        [ScriptedStep.call("wire", {"q": "1"}, id="w1"), ScriptedStep.reply("done")],
        parts=[facts],
    )
    assert (await h.run()).status == "waiting"
    stored = h.row.started_at
    first = [run for _, run in facts.seen]
    time.sleep(0.002)  # the resume episode starts measurably later
    h.store.respond(h.run_id, "w1", approved=True)
    assert (await h.run()).status == "completed"
    resumed = [run for _, run in facts.seen[len(first) :]]

    assert [phase for phase, _ in facts.seen] == [
        "prepare_run",
        "prepare_model_step",
        "prepare_run",
        "prepare_model_step",
    ]
    assert h.row.started_at == stored and stored is not None
    assert {run.started_at for run in first + resumed} == {stored.isoformat()}
    assert {run.initiator for run in first + resumed} == {"send"}
    assert {(r.execution.operation, r.execution.started_at) for r in first} == {
        ("send", stored.isoformat())
    }
    assert {r.execution.operation for r in resumed} == {"resume"}
    (episode_start,) = {r.execution.started_at for r in resumed}
    assert episode_start != resumed[0].started_at
    assert episode_start > resumed[0].started_at  # ISO 8601 in UTC sorts by time


async def test_lc_007_a_recovered_episode_keeps_the_logical_start() -> None:
    """LC-007: a second claim of the same run (recovery after a lost lease) does not move
    run.started_at; its execution.started_at is the new claim's."""
    facts = RunFacts()
    h = harness([ScriptedStep.reply("hi")], parts=[facts])
    await h.store.claim_run(h.run_id, owner="dead", lease_seconds=30)
    h.row.lease_expires_at = None  # the first worker died: its lease is up for grabs
    first_start = h.row.started_at
    time.sleep(0.002)
    assert (await h.run()).status == "completed"
    [(_, run), _step] = facts.seen
    assert first_start is not None and run.started_at == first_start.isoformat()
    assert run.execution.operation == "send"  # nothing was committed: not a resume
    assert run.execution.started_at > run.started_at
