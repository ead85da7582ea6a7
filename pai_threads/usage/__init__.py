"""Usage and cost: token counts of every step rolled up per run, thread, scope, agent and day,
priced with ``PAI["MODEL_PRICES"]``."""

from __future__ import annotations

from pai_threads.usage.prices import Price, PriceTableError, cost_of, price_for
from pai_threads.usage.rollups import (
    TOKEN_FIELDS,
    Grouping,
    UsageTotals,
    usage_rollup,
    usage_totals,
)

__all__ = [
    "TOKEN_FIELDS",
    "Grouping",
    "Price",
    "PriceTableError",
    "UsageTotals",
    "cost_of",
    "price_for",
    "usage_rollup",
    "usage_totals",
]
