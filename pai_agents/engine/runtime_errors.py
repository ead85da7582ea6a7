"""Reporting a run's failure to operators: ``on_runtime_error`` hooks and the private log.

A failing run keeps its error private (on the run, in the log); clients only ever see the
``failed`` status (LC-158). When a lifecycle hook raised, the composed lifecycle noted which
part and phase: :func:`hook_origin` reads that note back for the report.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, cast

from pai_agents._callables import call_user
from pai_agents.agent import AgentDefinition
from pai_agents.engine.store import ClaimedRun

__all__ = ["RuntimeErrorReport", "hook_origin", "log_run_failure", "report_runtime_error"]

logger = logging.getLogger("pai.engine")

_NOTE = "raised by lifecycle part "


@dataclass(frozen=True, kw_only=True)
class RuntimeErrorReport:
    """What ``on_runtime_error`` receives: the full error, for operators only.

    ``phase`` and ``part`` name the lifecycle hook that raised, when one did (parsed from
    the notes the composed lifecycle adds); clients never see any of this.
    """

    run_id: str
    thread_id: str
    agent_name: str
    error: BaseException
    phase: str | None = None
    part: str | None = None


def hook_origin(exc: BaseException) -> tuple[str | None, str | None]:
    """``(phase, part)`` of the lifecycle hook that raised ``exc``, else ``(None, None)``."""
    for note in getattr(exc, "__notes__", ()):
        if note.startswith(_NOTE):
            # "raised by lifecycle part 'name' in phase"
            head, _, phase = note.rpartition(" in ")
            return phase, head[len(_NOTE) :].strip("'")
    return None, None


def log_run_failure(run_id: str, exc: BaseException) -> dict[str, str]:
    """Log the failure with its traceback; return the private error stored on the run."""
    logger.error(
        "run %s failed: %s", run_id, type(exc).__name__, extra={"run_id": run_id}, exc_info=exc
    )
    return {"type": type(exc).__name__, "message": str(exc)[:2000]}


async def report_runtime_error(
    agent: AgentDefinition, claim: ClaimedRun, exc: BaseException
) -> None:
    """Call the agent's ``on_runtime_error`` (and a lifecycle's); never raises."""
    reporters = [agent.on_runtime_error]
    if agent.lifecycle is not None:
        reporters += [getattr(p, "on_runtime_error", None) for _, p in agent.lifecycle.parts]
    reporters = [r for r in reporters if callable(r)]
    if not reporters:
        return
    phase, part = hook_origin(exc)
    report = RuntimeErrorReport(
        run_id=claim.lease.run_id,
        thread_id=claim.thread_id,
        agent_name=agent.name,
        error=exc,
        phase=phase,
        part=part,
    )
    for reporter in reporters:
        try:
            await call_user(cast(Any, reporter), report)
        except Exception:  # a broken reporter must not mask the run's own failure
            logger.exception("on_runtime_error reporter failed for run %s", claim.lease.run_id)
