"""Handing a run to the process's background loop, claimed on the way.

Both executors end here: the in-process one right after the send's commit (on the
request's thread), a Celery task on its pool thread. The caller's thread is synchronous and
holds a database connection already, so it claims the run itself
(:func:`~pai_threads.execution.execute.claim_now`) and the loop starts the engine at once:
otherwise the loop's first act would be to hop to a store thread for the claim and back,
one more hand-over before the model is asked (the time to first token counts it).
"""

from __future__ import annotations

import logging
from concurrent.futures import Future

from pai_agents.engine.store import RunOutcome
from pai_agents.sync_calls import running_loop
from pai_threads.execution.execute import Claimed, aexecute_run, claim_now, worker_name
from pai_threads.executors.loop import background_loop

__all__ = ["run_on_background_loop"]

logger = logging.getLogger("pai.executors")


def run_on_background_loop(run_id: str) -> Future[RunOutcome | None]:
    """Claim ``run_id`` on this thread and execute it on the background loop; the future
    of its outcome (None: not claimable, as :func:`aexecute_run` returns).

    Claiming here fails only as the loop's own claim would (the database is away): then
    the loop claims it, and reports that failure the usual way (a Celery task retries)."""
    loop = background_loop()
    claimed: Claimed | None = None
    if running_loop() is None:  # Django refuses synchronous queries under a running loop
        try:
            claimed = claim_now(run_id, owner=worker_name(loop.native_id))
        except Exception:
            logger.warning(
                "run %s: claiming on the dispatching thread failed; the run loop claims it",
                run_id,
                exc_info=True,
                extra={"run_id": run_id},
            )
        else:
            if claimed is None:
                done: Future[RunOutcome | None] = Future()
                done.set_result(None)
                return done
    return loop.submit(aexecute_run(run_id, claimed=claimed))
