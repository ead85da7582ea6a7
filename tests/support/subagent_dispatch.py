"""An executor for the in-process sub-agent tests: it records what would be dispatched
and runs it on ``drain()``, so a test decides when the parent and the child run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pai_threads.execution import registry
from pai_threads.execution.execute import aexecute_run
from pai_threads.store import admission
from tests.support.subagent_agents import AGENTS

__all__ = ["Dispatched", "recording_executor", "serve_subagent_agents"]


class Dispatched:
    """Dispatched run ids, in order; ``drain()`` runs them (and what they dispatch)."""

    def __init__(self) -> None:
        self.runs: list[str] = []

    def dispatch(self, run_id: str) -> None:
        self.runs.append(run_id)

    def drain(self, limit: int = 20) -> list[str]:
        done: list[str] = []
        while self.runs and len(done) < limit:
            run_id = self.runs.pop(0)
            asyncio.run(aexecute_run(run_id))
            done.append(run_id)
        return done


def serve_subagent_agents(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Dispatched:
    """Serve the sub-agent test agents (the searcher registered through the planner's
    definition) and record dispatches instead of executing them."""
    paths = [f"tests.support.subagent_agents.{name}" for name in AGENTS if name != "searcher"]
    settings.PAI = {**settings.PAI, "AGENTS": [*settings.PAI["AGENTS"], *paths]}
    assert "searcher" in registry.agents()
    return recording_executor(monkeypatch)


def recording_executor(monkeypatch: pytest.MonkeyPatch) -> Dispatched:
    """Dispatches recorded (run by ``drain()``) instead of executed."""
    recorder = Dispatched()
    monkeypatch.setattr(admission, "get_executor", lambda: recorder)
    return recorder
