"""What tokens cost: the ``MODEL_PRICES`` table applied to a usage record.

Prices are per million tokens and kept as :class:`~decimal.Decimal` so that sums over many
steps do not drift. Cached input tokens are part of the input count and reasoning tokens
part of the output count (as providers report them), so each is charged at its own price
when the table gives one and at the plain input or output price otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from pai_threads.conf import pai_settings

__all__ = ["Price", "PriceTableError", "cost_of", "price_for"]

_MILLION = Decimal(1_000_000)


class PriceTableError(ValueError):
    """``PAI["MODEL_PRICES"]`` has an entry that is not a price (a system check reports it)."""


@dataclass(frozen=True, slots=True)
class Price:
    """One model's prices per million tokens."""

    input: Decimal
    output: Decimal
    cached_input: Decimal
    reasoning: Decimal

    @classmethod
    def parse(cls, model: str, entry: Any) -> Price:
        if not isinstance(entry, Mapping):
            raise PriceTableError(f"MODEL_PRICES[{model!r}] must be a mapping of prices")
        unknown = set(entry) - {"input", "output", "cachedInput", "reasoning"}
        if unknown:
            raise PriceTableError(f"MODEL_PRICES[{model!r}] has unknown keys {sorted(unknown)}")

        def amount(key: str, default: Decimal | None) -> Decimal:
            if key not in entry:
                if default is None:
                    raise PriceTableError(f"MODEL_PRICES[{model!r}] needs {key!r}")
                return default
            try:
                value = Decimal(str(entry[key]))
            except InvalidOperation:
                raise PriceTableError(f"MODEL_PRICES[{model!r}][{key!r}] is not a number") from None
            if not value.is_finite() or value < 0:
                raise PriceTableError(f"MODEL_PRICES[{model!r}][{key!r}] must be >= 0")
            return value

        input_price = amount("input", None)
        output_price = amount("output", None)
        return cls(
            input=input_price,
            output=output_price,
            cached_input=amount("cachedInput", input_price),
            reasoning=amount("reasoning", output_price),
        )

    def cost(self, usage: Mapping[str, Any]) -> Decimal:
        """The cost of one usage record (AI SDK field names)."""
        input_tokens = int(usage.get("inputTokens") or 0)
        output_tokens = int(usage.get("outputTokens") or 0)
        cached = min(int(usage.get("cachedInputTokens") or 0), input_tokens)
        reasoning = min(int(usage.get("reasoningTokens") or 0), output_tokens)
        total = (
            (input_tokens - cached) * self.input
            + cached * self.cached_input
            + (output_tokens - reasoning) * self.output
            + reasoning * self.reasoning
        )
        return total / _MILLION


def price_for(model_id: str | None, provider: str | None = None) -> Price | None:
    """The price of ``model_id`` ("provider:model" entries win over plain model ids)."""
    table: Mapping[str, Any] = pai_settings.MODEL_PRICES or {}
    if not model_id:
        return None
    for key in (f"{provider}:{model_id}" if provider else None, model_id):
        if key and key in table:
            return Price.parse(key, table[key])
    return None


def cost_of(
    usage: Mapping[str, Any], model_id: str | None, provider: str | None = None
) -> Decimal | None:
    """What ``usage`` cost on ``model_id``; None when the table has no price for it."""
    price = price_for(model_id, provider)
    return None if price is None else price.cost(usage)
