"""The ``RunAttempt`` model, the durable history of a run's claims (docs/durability.md).

A module of its own so the models module stays small; import it from ``pai_threads.models``
like every other model.
"""

from __future__ import annotations

from django.db import models

__all__ = ["RunAttempt"]


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
    reason = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["run", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "lease_token"], name="pai_attempt_per_lease")
        ]

    def __str__(self) -> str:
        return f"{self.run_id} attempt {self.number}"
