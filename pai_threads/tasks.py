"""Celery tasks. ``acks_late`` so a worker killed mid-run leaves the message to redeliver;
the run's lease (not the broker) decides who may execute it."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_init, worker_process_init
from django.db import InterfaceError, OperationalError, close_old_connections

from pai_threads.executors.gc_tuning import tune_gc
from pai_threads.executors.loop import background_loop

__all__ = ["execute_run", "generate_thread_title", "recover_runs"]


# PAI["GC_TUNING"] in workers (pai_threads.executors.gc_tuning): worker_init in the worker's
# main process, whatever the pool (solo and threads run tasks there; prefork forks its children
# with start-up's objects already frozen, so their collections never touch those pages), and
# worker_process_init in each prefork child, freezing what it allocated since the fork.
# Celery imports this module (autodiscover_tasks) before it sends either signal.
@worker_init.connect
def _tune_worker_gc(**_: Any) -> None:
    tune_gc()


@worker_process_init.connect
def _tune_pool_child_gc(**_: Any) -> None:
    tune_gc()


# A run dispatched while the database is away fails its claim: retried with backoff, it
# starts within seconds of the database's return instead of waiting for the sweeper's
# REDISPATCH_QUEUED_AFTER_SECONDS. A retry of a run that is executing (its lease is live)
# claims nothing and ends at once, so retrying never executes a run twice.
@shared_task(
    name="pai_threads.execute_run",
    acks_late=True,
    ignore_result=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=1,
    retry_backoff_max=16,
    max_retries=10,
)
def execute_run(run_id: str) -> str | None:
    from pai_threads.executors.run_on_loop import run_on_background_loop

    # Claimed on this pool thread, executed on the worker's loop. The thread then only waits:
    # as at the end of a request, its connection goes back (to the pool; closed with
    # CONN_MAX_AGE 0, kept while younger) instead of idling for the whole run.
    execution = run_on_background_loop(run_id)
    close_old_connections()
    outcome = execution.result()
    return outcome.status if outcome else None


@shared_task(name="pai_threads.generate_thread_title", ignore_result=True)
def generate_thread_title(thread_id: str, run_id: str) -> str | None:
    """A thread title after a completed run (AD-042): off the run, on any worker."""
    from pai_threads.execution.titles import agenerate

    return background_loop().submit(agenerate(thread_id, run_id)).result()


@shared_task(name="pai_threads.recover_runs", ignore_result=True)
def recover_runs() -> int:
    """The sweeper, for Celery beat: re-dispatch runs whose lease expired."""
    from pai_threads.execution.recovery import recover_runs as sweep

    return len(sweep())
