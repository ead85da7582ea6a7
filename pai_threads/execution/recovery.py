"""The sweeper: re-dispatch runs nobody is executing.

A run whose lease expired (its worker died, froze or lost the database) is dispatched
again; the next claim takes over with a higher fencing token and resumes from the last
committed step. That includes a run whose worker hit a database outage and could not even
record the failure: it stays ``running`` until its lease expires, then it is a crashed run
like any other. Queued runs that sat too long (a lost broker message) are dispatched again
too. Dispatching twice is harmless: only one claim can succeed.

:class:`Sweeper` is the daemon form (``pai_recover --loop``, the embedded sweeper): a sweep
that fails (the database or the broker is away) is logged and retried with backoff; the
loop itself never ends on it.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import close_old_connections, connections
from django.db.models import Q
from django.utils import timezone

from pai_threads.conf import pai_settings
from pai_threads.executors import get_executor
from pai_threads.models import Run
from pai_threads.store.attempts import record_lost_leases
from pai_threads.store.sql import lease_expired

__all__ = ["Sweep", "Sweeper", "find_stalled_runs", "recover_runs", "waiting_dispatches"]

logger = logging.getLogger("pai.recovery")


def find_stalled_runs(limit: int = 500) -> list[str]:
    now = timezone.now()
    queued_before = now - timedelta(seconds=pai_settings.REDISPATCH_QUEUED_AFTER_SECONDS)
    stalled = lease_expired(now) | Q(status=Run.Status.QUEUED, created_at__lt=queued_before)
    # Active runs only, by the condition of pai_one_active_run_per_thread: both planners
    # then read that index (the few live runs) instead of every run.
    runs = Run.objects.active().filter(stalled).order_by("created_at")
    return list(runs.values_list("id", flat=True)[:limit])


def recover_runs(limit: int = 500) -> list[str]:
    """Dispatch every stalled run once; returns their ids. The attempt of an expired lease
    is recorded as ``lease_lost`` first (the attempt history, docs/durability.md)."""
    run_ids = find_stalled_runs(limit)
    record_lost_leases(run_ids, timezone.now())
    executor = get_executor()
    for run_id in run_ids:
        logger.info("re-dispatching stalled run %s", run_id, extra={"run_id": run_id})
        executor.dispatch(run_id)
    return run_ids


def waiting_dispatches() -> int:
    """Dispatches the executor holds until its broker is back (0 for one without a broker)."""
    pending = getattr(get_executor(), "pending", None)
    return int(pending()) if pending is not None else 0


@dataclass(frozen=True)
class Sweep:
    run_ids: list[str]
    #: Dispatches still waiting for the broker after this sweep (they go once it is back).
    waiting: int


class Sweeper:
    """Sweeps every ``interval`` seconds; after a failure, sooner, backing off up to it.

    The first retry comes after ``first_retry`` seconds, each next one after twice as long,
    never more than ``interval``: an outage is noticed as soon as the service is back, and a
    long one costs one logged attempt per ``interval``.
    """

    def __init__(self, interval: float, *, first_retry: float = 0.5) -> None:
        self.interval = max(interval, 0.01)
        self.first_retry = min(first_retry, self.interval)
        self.failures = 0

    def sweep(self) -> Sweep | None:
        """One sweep; None if it failed (logged, and counted for the backoff)."""
        try:
            run_ids = recover_runs()
            waiting = waiting_dispatches()
        except Exception as exc:
            self.failures += 1
            if self.failures == 1:
                logger.exception("sweep failed; retrying in %.1fs", self.next_delay())
            else:
                logger.warning(
                    "sweep failed again (%d in a row: %s); retrying in %.1fs",
                    self.failures,
                    exc,
                    self.next_delay(),
                )
            # A connection broken by the outage must not be reused by the next attempt.
            with contextlib.suppress(Exception):
                connections.close_all()
            return None
        finally:
            with contextlib.suppress(Exception):
                close_old_connections()
        if self.failures:
            logger.warning("sweeper working again after %d failed sweep(s)", self.failures)
            self.failures = 0
        if run_ids:
            logger.info("sweep re-dispatched %d run(s): %s", len(run_ids), " ".join(run_ids))
        if waiting:
            logger.warning("%d dispatch(es) waiting for the broker", waiting)
        return Sweep(run_ids=run_ids, waiting=waiting)

    def next_delay(self) -> float:
        if not self.failures:
            return self.interval
        return min(self.interval, self.first_retry * 2 ** (self.failures - 1))
