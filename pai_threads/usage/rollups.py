"""Token usage and cost rolled up from step rows, grouped in the database.

Steps are the source of truth: each holds its own usage and the model that produced it, so a
run that switched models is priced per step. Sums happen in SQL (one grouped query per
roll-up, on SQLite and PostgreSQL alike); only the price table is applied in Python, per
(group, provider, model) row, so the cost of a large table is still one query.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from django.db.models import BigIntegerField, Count, F, Q, QuerySet, Sum
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, TruncDate

from pai_threads.models import Step
from pai_threads.usage.prices import price_for

__all__ = ["TOKEN_FIELDS", "Grouping", "UsageTotals", "usage_rollup", "usage_totals"]

Grouping = Literal["run", "thread", "scope", "agent", "day", "model"]
TOKEN_FIELDS = ("inputTokens", "outputTokens", "reasoningTokens", "cachedInputTokens")

_KEYS: dict[str, Any] = {
    "run": F("run_id"),
    "thread": F("run__thread_id"),
    "scope": F("run__scope_key"),
    "agent": F("run__agent_name"),
    "day": TruncDate("started_at"),
    "model": KeyTextTransform("modelId", "request"),
}


@dataclass(slots=True)
class UsageTotals:
    """Tokens and cost of a set of steps. ``cost`` is None when no step had a price;
    ``unpriced_steps`` counts the steps whose model the price table does not list."""

    key: Any = None
    steps: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_FIELDS, 0))
    estimated_steps: int = 0
    cost: Decimal | None = None
    unpriced_steps: int = 0

    def add(self, row: Mapping[str, Any]) -> None:
        self.steps += row["steps"]
        self.estimated_steps += row["estimated"]
        for name in TOKEN_FIELDS:
            self.tokens[name] += row[name] or 0
        price = price_for(row["model"], row["provider"])
        if price is None:
            self.unpriced_steps += row["steps"]
            return
        self.cost = (self.cost or Decimal(0)) + price.cost(row)

    def as_json(self) -> dict[str, Any]:
        """JSON-ready: cost as a decimal string (exact), None when unpriced."""
        key = self.key.isoformat() if hasattr(self.key, "isoformat") else self.key
        return {
            "key": key,
            "steps": self.steps,
            **self.tokens,
            "totalTokens": self.tokens["inputTokens"] + self.tokens["outputTokens"],
            "estimatedSteps": self.estimated_steps,
            "cost": None if self.cost is None else str(self.cost.normalize()),
            "unpricedSteps": self.unpriced_steps,
        }


def _token(name: str) -> Coalesce:
    return Coalesce(Sum(Cast(KeyTextTransform(name, "usage"), BigIntegerField())), 0)


def _grouped(steps: QuerySet[Step], *keys: Any) -> QuerySet[Any]:
    named = {f"k{i}": key for i, key in enumerate(keys)}
    return (
        steps.annotate(
            **named,
            model=KeyTextTransform("modelId", "request"),
            provider=KeyTextTransform("provider", "request"),
        )
        .values(*named, "model", "provider")
        .annotate(
            steps=Count("id"),
            estimated=Count("id", filter=Q(usage__estimated=True)),
            **{name: _token(name) for name in TOKEN_FIELDS},
        )
        .order_by(*named)
    )


def _filtered(
    steps: QuerySet[Step] | None, since: datetime | None, until: datetime | None
) -> QuerySet[Step]:
    steps = Step.objects.all() if steps is None else steps
    if since is not None:
        steps = steps.filter(started_at__gte=since)
    if until is not None:
        steps = steps.filter(started_at__lt=until)
    return steps


def usage_rollup(
    group: Grouping,
    *,
    steps: QuerySet[Step] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[UsageTotals]:
    """Usage and cost per ``group`` key (run, thread, scope, agent, day or model), ordered
    by key, over ``steps`` (all steps by default) started in ``[since, until)``."""
    if group not in _KEYS:
        raise ValueError(f"unknown grouping {group!r}; use one of {sorted(_KEYS)}")
    totals: dict[Any, UsageTotals] = {}
    for row in _grouped(_filtered(steps, since, until), _KEYS[group]):
        totals.setdefault(row["k0"], UsageTotals(key=row["k0"])).add(row)
    return list(totals.values())


def usage_totals(steps: QuerySet[Step]) -> UsageTotals:
    """Usage and cost of ``steps`` as one total (a run's, a thread's, a scope's)."""
    total = UsageTotals()
    for row in _grouped(steps):
        total.add(row)
    return total
