"""Django signals of a run's lifecycle, for other apps to observe (docs/operations.md).

Each is sent once the change is committed (never for a rolled-back one), with
``sender=Run`` and keyword arguments only:

* :data:`run_queued`: a run was created (by a send, a trigger, a regenerate, a command or
  the admission of queued input). ``run_id``, ``thread_id``, ``scope_key``, ``agent_name``,
  ``initiator``.
* :data:`run_started`: a worker claimed the run and begins an episode (again after a resume
  or a recovery). The same four ids, and ``attempt`` (1 for the first claim).
* :data:`run_waiting`: the episode stopped to wait for an approval or a client tool. The
  four ids.
* :data:`run_finished`: the run ended. The four ids and ``status``: ``completed``,
  ``failed``, ``cancelled`` or ``blocked``.

Receivers are called with ``send_robust``: one that raises is logged (logger
``pai.signals``) and changes nothing. A sync receiver may use the ORM; one connected to a
signal sent from a worker's event loop runs on a thread (``asend_robust``).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import Signal

from pai_threads.models import Run

__all__ = [
    "asend_run_signal",
    "queued_after_commit",
    "run_finished",
    "run_ids",
    "run_queued",
    "run_started",
    "run_waiting",
    "send_after_commit",
]

logger = logging.getLogger("pai.signals")

run_queued = Signal()
run_started = Signal()
run_waiting = Signal()
run_finished = Signal()


def _report(signal: Signal, responses: list[tuple[Any, Any]]) -> None:
    for receiver, result in responses:
        if isinstance(result, Exception):
            logger.error(
                "a receiver of a PAI run signal raised: %r",
                receiver,
                exc_info=(type(result), result, result.__traceback__),
            )


def _send(signal: Signal, kwargs: dict[str, Any]) -> None:
    _report(signal, signal.send_robust(sender=Run, **kwargs))


def send_after_commit(signal: Signal, **kwargs: Any) -> None:
    """Send ``signal`` once the current transaction commits (at once outside one)."""
    if signal.has_listeners(Run):
        transaction.on_commit(partial(_send, signal, kwargs))


async def asend_run_signal(signal: Signal, **kwargs: Any) -> None:
    """From async code whose change is already committed (the executor)."""
    if signal.has_listeners(Run):
        _report(signal, await signal.asend_robust(sender=Run, **kwargs))


def run_ids(run: Run) -> dict[str, Any]:
    """The keyword arguments every run signal carries."""
    return {
        "run_id": run.id,
        "thread_id": run.thread_id,
        "scope_key": run.scope_key,
        "agent_name": run.agent_name,
    }


def queued_after_commit(run: Run) -> None:
    """:data:`run_queued` for a new run, after commit. Runs created through the ORM get it
    from ``post_save``; a path that inserts the row itself (``send``'s fast insert) calls
    it, before it dispatches the run (so that ``run_started`` comes after)."""
    send_after_commit(run_queued, **run_ids(run), initiator=run.initiator)


def _created(sender: type[Run], instance: Run, created: bool, **kwargs: Any) -> None:
    # Every other path that starts a run creates its row; an imported run is not queued.
    if created and instance.status == Run.Status.QUEUED and not kwargs.get("raw"):
        queued_after_commit(instance)


post_save.connect(_created, sender=Run, dispatch_uid="pai_threads.signals.run_queued")
