"""The ``RewriteDelivery`` model: the lease that serializes history rewrites per thread.

A module of its own so the models module stays small; import it from ``pai_threads.models``
like every other model.
"""

from __future__ import annotations

from django.db import models

__all__ = ["RewriteDelivery"]


class RewriteDelivery(models.Model):
    """The per-thread lease that serializes ``history_rewritten`` across processes (LC-065).

    A process delivering a fact holds ``owner`` until ``expires_at`` (renewed while the hook
    runs; an expired lease can be taken over). A fact that finds the lease held waits in
    ``pending`` (only the newest: facts are coalesced) for the holder, which delivers it
    before releasing. ``delivered_version`` drops facts older than one already delivered.
    """

    thread = models.OneToOneField(
        "pai_threads.Thread", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    owner = models.CharField(max_length=64, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True)
    pending = models.JSONField(null=True, blank=True)
    pending_version = models.PositiveIntegerField(default=0)
    delivered_version = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"rewrite delivery of {self.thread_id}"
