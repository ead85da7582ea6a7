"""Usage endpoints: the tokens and cost of one thread or run, for the identity that owns it.

Another partition's id answers 404 exactly like a missing one (the same lookups as the
thread and run endpoints). Cost is a decimal string in the price table's currency, or null
when a step's model has no price.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from pai_threads import services
from pai_threads.api.auth import IdentityAuth, request_identity
from pai_threads.api.schemas import errors
from pai_threads.events.projections import CamelSchema
from pai_threads.models import Step
from pai_threads.usage import usage_totals

__all__ = ["UsageOut", "router"]

router = Router(tags=["usage"])


class UsageOut(CamelSchema):
    """Token counts summed over the steps; ``estimated_steps`` counts steps whose usage PAI
    estimated (the provider sent none), ``unpriced_steps`` those whose model has no price."""

    steps: int
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cached_input_tokens: int
    total_tokens: int
    estimated_steps: int
    cost: str | None
    unpriced_steps: int


def _out(steps: Any) -> dict[str, Any]:
    totals = usage_totals(steps).as_json()
    totals.pop("key")
    return totals


@router.get(
    "/threads/{thread_id}/usage",
    response={200: UsageOut, **errors()},
    by_alias=True,
    auth=IdentityAuth(),
)
def thread_usage(request: HttpRequest, thread_id: str) -> dict[str, Any]:
    """What the thread's runs have spent so far, all steps included."""
    thread = services.get_thread(request_identity(request), thread_id)
    return _out(Step.objects.filter(run__thread_id=thread.id))


@router.get(
    "/runs/{run_id}/usage",
    response={200: UsageOut, **errors()},
    by_alias=True,
    auth=IdentityAuth(),
)
def run_usage(request: HttpRequest, run_id: str) -> dict[str, Any]:
    """What one run has spent: its steps so far (a running run's finished steps)."""
    run = services.get_run(request_identity(request), run_id)
    return _out(Step.objects.filter(run_id=run.id))
