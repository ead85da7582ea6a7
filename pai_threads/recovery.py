"""The sweeper: re-dispatch runs nobody is executing.

A run whose lease expired (its worker died, froze or lost the database) is dispatched
again; the next claim takes over with a higher fencing token and resumes from the last
committed step. Queued runs that sat too long (a lost broker message) are dispatched again
too. Dispatching twice is harmless: only one claim can succeed.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from pai_threads.conf import pai_settings
from pai_threads.models import Run

__all__ = ["find_stalled_runs", "recover_runs"]

logger = logging.getLogger("pai.recovery")


def find_stalled_runs(limit: int = 500) -> list[str]:
    now = timezone.now()
    queued_before = now - timedelta(seconds=pai_settings.REDISPATCH_QUEUED_AFTER_SECONDS)
    stalled = Q(status=Run.Status.RUNNING, lease_expires_at__lt=now) | Q(
        status=Run.Status.QUEUED, created_at__lt=queued_before
    )
    return list(
        Run.objects.filter(stalled).order_by("created_at").values_list("id", flat=True)[:limit]
    )


def recover_runs(limit: int = 500) -> list[str]:
    """Dispatch every stalled run once; returns their ids."""
    from pai_threads.executors import get_executor

    run_ids = find_stalled_runs(limit)
    executor = get_executor()
    for run_id in run_ids:
        logger.info("re-dispatching stalled run %s", run_id, extra={"run_id": run_id})
        executor.dispatch(run_id)
    return run_ids
