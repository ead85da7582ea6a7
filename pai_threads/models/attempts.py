"""The ``RunAttempt`` model, the durable history of a run's claims (docs/durability.md).

A module of its own so the models module stays small; import it from ``pai_threads.models``
like every other model.
"""

from __future__ import annotations

from django.db import models

__all__ = ["USUAL_REASONS", "RunAttempt"]


class RunAttempt(models.Model):
    """One claim of a run (lease, worker) and how it ended: docs/durability.md, attempts."""

    class End(models.TextChoices):
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"
        BLOCKED = "blocked"
        WAITING = "waiting"
        LEASE_LOST = "lease_lost"
        TAKEN_OVER = "taken_over"

    # No database constraint: rows a run writes (pai_threads.models' docstring, 0018).
    run = models.ForeignKey(
        "pai_threads.Run",
        on_delete=models.CASCADE,
        related_name="attempts",
        db_index=False,
        db_constraint=False,
    )
    number = models.PositiveIntegerField()
    worker = models.CharField(max_length=200)
    lease_token = models.BigIntegerField()
    claimed_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    ended = models.CharField(max_length=16, choices=End.choices, blank=True, default="")
    # Only what ``ended`` does not say already (a takeover's, a lost lease's): the usual
    # ends store none (a run writes this row at every end) and :meth:`explanation` names them.
    reason = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["run", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "lease_token"], name="pai_attempt_per_lease")
        ]

    def __str__(self) -> str:
        return f"{self.run_id} attempt {self.number}"

    def explanation(self) -> str:
        """Why the attempt ended, as operators read it: the stored reason, else what the
        way it ended means (never private error details: those stay on the run)."""
        return self.reason or USUAL_REASONS.get(self.ended, "")


#: What each usual way of ending means (the stored ``reason`` is empty for these).
USUAL_REASONS: dict[str, str] = {
    RunAttempt.End.COMPLETED: "the run completed",
    RunAttempt.End.FAILED: "the run failed (its error is on the run)",
    RunAttempt.End.CANCELLED: "cancel requested",
    RunAttempt.End.BLOCKED: "blocked by the agent's lifecycle",
    RunAttempt.End.WAITING: "waiting for an approval or a client tool",
}
