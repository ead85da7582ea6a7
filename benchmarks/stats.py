"""Small statistics helpers: percentiles without numpy, and spread over repetitions."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["median", "percentile", "spread"]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile: an observed value, never an interpolation between two."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return float(ordered[rank - 1])


def spread(values: Sequence[float]) -> dict[str, float]:
    """Min, median and max of per-repetition figures: how much the machine's noise moves them."""
    if not values:
        return {"min": math.nan, "median": math.nan, "max": math.nan}
    return {"min": min(values), "median": median(values), "max": max(values)}
