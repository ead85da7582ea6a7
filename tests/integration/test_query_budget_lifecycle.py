"""The SQL budget of a lifecycle agent's run, pinned next to the plain agent's.

The plain budget (tests/integration/test_query_budget.py) covers agents without a
lifecycle. Every agent runs the one run loop (``pai_agents.engine.episode``); here the
benchmark workloads W1 (a tool round trip) and W2 (a one-step answer) run with the
benchmark's own scripted model and tool, plus a lifecycle that overrides every phase of
``PHASES`` and changes nothing (``Passthrough``), so the numbers are what overridden phases
cost. Pinned before issue 10 merged the two former loops; they must stay the same or go
down, never up. When a change removes statements, lower them here.

Counted exactly like the plain budget (:func:`tests.support.query_budget.measure_run`).
"""

from __future__ import annotations

import pytest
from django.db import connection

from benchmarks.agents import w1_agent, w2_agent
from pai_agents import define_agent
from pai_agents.agent import AgentDefinition
from pai_agents.lifecycle.hooks import PHASES, overridden_phases
from pai_threads.models import Message
from tests.support.golden_lifecycle import EveryPhase, Passthrough
from tests.support.query_budget import measure_run

pytestmark = pytest.mark.django_db(transaction=True)


def with_lifecycle(plain: AgentDefinition) -> AgentDefinition:
    """``plain`` (its model, tools and instructions) with every phase overridden."""
    return define_agent(
        f"{plain.name}_lifecycle",
        instructions=plain.instructions,
        model=plain.model,
        tools=plain.tools,
        lifecycle=Passthrough(),
    )


W1_LIFECYCLE = with_lifecycle(w1_agent)
W2_LIFECYCLE = with_lifecycle(w2_agent)

# (statements + BEGIN/COMMIT, commits) per phase and database. Measured when this budget was
# added (before issue 10), the plain agent's executions cost 13/4 and 7/2 on SQLite, 8/4 and
# 6/2 on PostgreSQL (test_query_budget.py): the hooked loop reads the thread's messages
# once per run and again per step (the tool round trip sends six message SELECTs where the
# plain loop sends one). The attempt history added 4 statements on SQLite only (the claim's
# transaction with its attempt INSERT, the end's UPDATE; see test_query_budget.py). A send to
# an idle thread on PostgreSQL is one statement after the thread's read (7 -> 2, fused_send).
# The last step ends the run in one autocommit statement there (step_writes: 13 -> 10, 9 -> 6).
# A send to a thread this process created skips its read (thread_headers: accept -1).
BUDGET: dict[str, dict[str, dict[str, tuple[int, int]]]] = {
    "sqlite": {
        "tool round trip": {"accept": (6, 1), "execution": (22, 4)},
        "one-step answer": {"accept": (6, 1), "execution": (14, 2)},
    },
    "postgresql": {
        "tool round trip": {"accept": (1, 1), "execution": (10, 4)},
        "one-step answer": {"accept": (1, 1), "execution": (6, 2)},
    },
}


@pytest.mark.parametrize("lifecycle", [Passthrough, EveryPhase])
def test_the_budget_and_golden_lifecycles_override_every_phase(lifecycle: type) -> None:
    """A phase added to ``PHASES`` must be added to both (the golden recordings use
    ``EveryPhase``), or the budget would stop covering it."""
    assert overridden_phases(lifecycle()) == PHASES


@pytest.mark.parametrize(
    ("workload", "agent", "steps"),
    [("tool round trip", W1_LIFECYCLE, 2), ("one-step answer", W2_LIFECYCLE, 1)],
)
def test_a_lifecycle_run_spends_its_pinned_sql_budget(
    monkeypatch: pytest.MonkeyPatch, workload: str, agent: AgentDefinition, steps: int
) -> None:
    measured = measure_run(monkeypatch, agent)
    assert measured.run.step_count == steps and measured.run.lease_owner == ""
    assert Message.objects.filter(run=measured.run).count() == 1 + steps
    assert measured.phases == BUDGET[connection.vendor][workload], (
        f"{workload} with a lifecycle on {connection.vendor}: (statements incl. BEGIN/COMMIT, "
        f"commits) changed; execution sent:\n{measured.listing}"
    )
