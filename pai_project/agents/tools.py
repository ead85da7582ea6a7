"""The demo agent's tools: one of each kind a visitor should see.

``calculator`` and ``clock`` run at once; ``send_email`` waits for a person to approve it;
``ask_reservation`` has no server side: the chat page answers it with a form built from its
output schema; ``count_primes`` does real work in batches and writes ToolData (durable
progress, transient preliminary counts) so its card moves while it runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from datetime import UTC, date, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from pai_agents import ToolContext, ToolError, tool
from pai_project.agents.calculator import evaluate

__all__ = [
    "PRIME_BATCHES",
    "Reservation",
    "ask_reservation",
    "calculator",
    "clock",
    "count_primes",
    "send_email",
]


class CalculatorInput(BaseModel):
    expression: str = Field(
        description="An arithmetic expression, e.g. '(2 + 3) * 7'.", max_length=200
    )


class ClockInput(BaseModel):
    timezone: str = Field(default="UTC", description="An IANA time zone name, e.g. 'Europe/Paris'.")


@tool(input=CalculatorInput)
def calculator(args: CalculatorInput) -> dict[str, Any]:
    """Evaluate an arithmetic expression exactly. Use it for any calculation."""
    try:
        return {"expression": args.expression, "result": evaluate(args.expression)}
    except (ValueError, ZeroDivisionError, OverflowError) as exc:
        raise ToolError(f"Cannot evaluate {args.expression!r}: {exc}") from exc


@tool(input=ClockInput)
def clock(args: ClockInput) -> dict[str, str]:
    """Tell the current date and time in a time zone."""
    try:
        zone = ZoneInfo(args.timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ToolError(f"Unknown time zone {args.timezone!r}") from exc
    now = datetime.now(UTC).astimezone(zone)
    return {
        "timezone": args.timezone,
        "iso": now.isoformat(timespec="seconds"),
        "weekday": now.strftime("%A"),
    }


class EmailInput(BaseModel):
    to: str = Field(description="The recipient's address.", max_length=200)
    subject: str = Field(description="The subject line.", max_length=200)
    body: str = Field(description="The message text.", max_length=5000)


@tool(input=EmailInput, needs_approval=True)
def send_email(args: EmailInput) -> dict[str, Any]:
    """Send an email. A person approves or denies every call before it runs (the demo only
    pretends to send it)."""
    digest = hashlib.sha256(f"{args.to}\n{args.subject}\n{args.body}".encode()).hexdigest()
    return {"sent": True, "to": args.to, "subject": args.subject, "messageId": digest[:12]}


class ReservationRequest(BaseModel):
    question: str = Field(description="What to ask the user.", max_length=500)


class Reservation(BaseModel):
    """The user's answer: the page builds its form from this schema."""

    name: str = Field(title="Name", description="Who the table is booked for.", min_length=1)
    guests: int = Field(title="Guests", ge=1, le=12, default=2)
    day: date = Field(title="Day")
    seating: Literal["indoors", "terrace", "bar"] = Field(title="Seating", default="indoors")
    high_chair: bool = Field(title="High chair needed", default=False)
    notes: str | None = Field(default=None, title="Notes", max_length=500)


ask_reservation = tool(
    "ask_reservation",
    input=ReservationRequest,
    output=Reservation,
    description=(
        "Ask the user for the details of a restaurant reservation. The user answers in the "
        "chat; the run waits until they do."
    ),
)


class PrimesInput(BaseModel):
    limit: int = Field(default=300_000, ge=10, le=2_000_000, description="Count primes up to this.")


PRIME_BATCHES = 10
_BATCH_PAUSE = 0.4  # seconds: slow enough to watch the progress bar move


def _small_primes(limit: int) -> list[int]:
    """The primes up to ``limit`` (a plain sieve of Eratosthenes)."""
    flags = bytearray([1]) * (limit + 1)
    flags[:2] = b"\x00\x00"
    for n in range(2, math.isqrt(limit) + 1):
        if flags[n]:
            flags[n * n :: n] = bytearray(len(range(n * n, limit + 1, n)))
    return [n for n, flag in enumerate(flags) if flag]


def _primes_between(low: int, high: int, base: list[int]) -> list[int]:
    """The primes in [low, high), sieved by the base primes (a segmented sieve)."""
    flags = bytearray([1]) * (high - low)
    for p in base:
        if p * p >= high:
            break
        start = max(p * p, (low + p - 1) // p * p)
        flags[start - low :: p] = bytearray(len(range(start, high, p)))
    return [low + i for i, flag in enumerate(flags) if flag and low + i >= 2]


@tool(input=PrimesInput)
async def count_primes(args: PrimesInput, ctx: ToolContext) -> dict[str, Any]:
    """Count the prime numbers up to a limit, reporting progress while it works."""
    base = _small_primes(math.isqrt(args.limit))
    step = math.ceil((args.limit + 1) / PRIME_BATCHES)
    count, largest = 0, None
    for batch in range(PRIME_BATCHES):
        ctx.signal.raise_if_aborted()
        low, high = batch * step, min(args.limit + 1, (batch + 1) * step)
        found = await asyncio.to_thread(_primes_between, low, high, base)
        count += len(found)
        largest = found[-1] if found else largest
        label = f"Sieved {high - 1:,} of {args.limit:,}"
        await ctx.data.write(
            "progress", {"value": batch + 1, "max": PRIME_BATCHES, "label": label}, id="main"
        )
        # A preliminary result: live only, replaced by the final output when the call ends.
        await ctx.data.write(
            "preliminary", {"primes": count, "largest": largest}, id="found", transient=True
        )
        if batch + 1 < PRIME_BATCHES:
            await asyncio.sleep(_BATCH_PAUSE)
    return {"limit": args.limit, "count": count, "largest": largest}
