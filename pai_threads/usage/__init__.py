"""Usage and cost: token counts of every step rolled up per run, thread, scope, agent and day,
priced with ``PAI["MODEL_PRICES"]``; :class:`ScopeBudget` refuses runs of a scope over its
token or cost budget."""

from __future__ import annotations

from pai_threads.usage.budget import (
    BUDGET_EXCEEDED,
    Budget,
    BudgetExceeded,
    ScopeBudget,
    Window,
    budget_check,
)
from pai_threads.usage.prices import Price, PriceTableError, cost_of, price_for
from pai_threads.usage.rollups import (
    TOKEN_FIELDS,
    Grouping,
    UsageTotals,
    usage_rollup,
    usage_totals,
)

__all__ = [
    "BUDGET_EXCEEDED",
    "TOKEN_FIELDS",
    "Budget",
    "BudgetExceeded",
    "Grouping",
    "Price",
    "PriceTableError",
    "ScopeBudget",
    "UsageTotals",
    "Window",
    "budget_check",
    "cost_of",
    "price_for",
    "usage_rollup",
    "usage_totals",
]
