"""Per-scope token and cost budgets, enforced before a run calls the model.

:class:`ScopeBudget` is a lifecycle part: add it to an agent's ``lifecycle`` and every run
of a scope that has spent its budget in the current window (UTC day, UTC month, or all
time) is refused in ``prepare_run``, before any model call. The refusal is typed: the run
ends ``blocked`` with the reason ``budget_exceeded``, the client gets the refusal text as
the assistant's answer and :class:`BudgetExceeded`'s fields in the run's public metadata
under ``budget``. Spending is read from the steps' stored usage (the roll-ups of
:mod:`pai_threads.usage.rollups`): one grouped query per check. A resumed episode (after an
approval or a client tool's answer) is not refused: its run was admitted under budget.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from django.utils import timezone

from pai_agents.lifecycle import AgentLifecycle, AssistantResponse, PrepareRunInput, Respond
from pai_agents.lifecycle.metadata import InvalidMetadata
from pai_threads.models import Run, Step
from pai_threads.store.db import run_user_sync
from pai_threads.usage.rollups import UsageTotals, usage_totals

__all__ = ["BUDGET_EXCEEDED", "Budget", "BudgetExceeded", "ScopeBudget", "Window", "budget_check"]

BUDGET_EXCEEDED = "budget_exceeded"
Window = Literal["day", "month", "total"]


@dataclass(frozen=True, slots=True)
class Budget:
    """At most ``max_tokens`` tokens (input + output) and/or ``max_cost`` (in the price
    table's currency; unpriced steps cost nothing) per scope and ``window``."""

    max_tokens: int | None = None
    max_cost: Decimal | None = None
    window: Window = "day"

    def __post_init__(self) -> None:
        if self.max_tokens is None and self.max_cost is None:
            raise ValueError("a Budget needs max_tokens or max_cost")
        if self.window not in ("day", "month", "total"):
            raise ValueError("window is 'day', 'month' or 'total'")
        if self.max_cost is not None:
            object.__setattr__(self, "max_cost", Decimal(str(self.max_cost)))


@dataclass(frozen=True, slots=True)
class BudgetExceeded:
    """The typed refusal: what was spent against which limit, and when the window resets
    (None for an all-time budget)."""

    scope_key: str
    window: Window
    limit: Literal["tokens", "cost"]
    used: int | Decimal
    allowed: int | Decimal
    resets_at: datetime | None
    code: str = BUDGET_EXCEEDED

    def public(self) -> dict[str, Any]:
        """The client's view (no scope key: the caller knows its own)."""
        return {
            "code": self.code,
            "window": self.window,
            "limit": self.limit,
            "used": str(self.used),
            "allowed": str(self.allowed),
            "resetsAt": self.resets_at.isoformat() if self.resets_at else None,
        }


def _window(window: Window, now: datetime) -> tuple[datetime | None, datetime | None]:
    now = now.astimezone(UTC)
    if window == "total":
        return None, None
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if window == "day":
        return day, day + timedelta(days=1)
    month = day.replace(day=1)
    following = (month + timedelta(days=32)).replace(day=1)
    return month, following


def _spent(scope_key: str, since: datetime | None) -> UsageTotals:
    # Through the scope's threads (pai_thread_scope_archived's prefix, then
    # pai_run_thread_created and each run's steps): runs have no scope index (migration
    # 0017); a run's scope_key is its thread's, and the run's own is compared too.
    steps = Step.objects.filter(run__thread__scope_key=scope_key, run__scope_key=scope_key)
    if since is not None:
        steps = steps.filter(started_at__gte=since)
    return usage_totals(steps)


def budget_check(
    scope_key: str, budget: Budget, *, now: datetime | None = None
) -> BudgetExceeded | None:
    """The refusal when ``scope_key`` has spent ``budget`` in its current window, else None
    (one grouped query; also for views that want to refuse a send before it is stored)."""
    since, resets = _window(budget.window, now or timezone.now())
    spent = _spent(scope_key, since)
    tokens = spent.tokens["inputTokens"] + spent.tokens["outputTokens"]
    if budget.max_tokens is not None and tokens >= budget.max_tokens:
        return BudgetExceeded(scope_key, budget.window, "tokens", tokens, budget.max_tokens, resets)
    cost = spent.cost or Decimal(0)
    if budget.max_cost is not None and cost >= budget.max_cost:
        return BudgetExceeded(scope_key, budget.window, "cost", cost, budget.max_cost, resets)
    return None


def _scope_of(run_id: str) -> str | None:
    return Run.objects.filter(id=run_id).values_list("scope_key", flat=True).first()


class ScopeBudget(AgentLifecycle):
    """Refuse runs of a scope over its budget (see the module docstring).

    Give one ``Budget`` for every scope, or ``budget_for(scope_key)`` returning a scope's
    Budget (None: unlimited), called on a database thread (it may use the ORM). ``message``
    is the refusal the user reads."""

    name = "scope_budget"

    def __init__(
        self,
        budget: Budget | None = None,
        *,
        budget_for: Callable[[str], Budget | None] | None = None,
        message: str = "This account has used its budget for now. Please try again later.",
    ) -> None:
        if (budget is None) == (budget_for is None):
            raise ValueError("give a budget or budget_for, not both")
        self.budget = budget
        self.budget_for = budget_for
        self.message = message

    def refusal_for(self, run_id: str) -> BudgetExceeded | None:
        """The refusal for the run's scope now, or None (sync: call it on a database thread)."""
        scope_key = _scope_of(run_id)
        if scope_key is None:
            return None
        budget = self.budget if self.budget_for is None else self.budget_for(scope_key)
        return None if budget is None else budget_check(scope_key, budget)

    async def prepare_run(self, input: PrepareRunInput) -> Respond | None:
        if input.run.execution.operation == "resume":
            return None
        refusal = await run_user_sync(self.refusal_for, input.run.run_id)
        if refusal is None:
            return None
        # An agent whose run metadata schema has no room for it still refuses the run.
        with suppress(InvalidMetadata):
            await input.run.metadata.merge({"budget": refusal.public()})
        return Respond(
            AssistantResponse(text=self.message),
            outcome="blocked",
            reason=refusal.code,
        )
