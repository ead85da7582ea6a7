"""The operator console: readable, searchable views of every runtime row.

Rows are shown, never edited: operators change them through runtime actions (cancel,
recover), which keep the store's invariants and notify live clients. Private metadata and
private error details need the ``pai_threads.view_private_metadata`` permission.
"""

from __future__ import annotations

from pai_threads.admin.actions import PendingActionAdmin, QueueItemAdmin
from pai_threads.admin.attempts import RunAttemptAdmin
from pai_threads.admin.base import PRIVATE_PERMISSION, ReadOnlyAdmin, can_see_private
from pai_threads.admin.files import FileAdmin
from pai_threads.admin.messages import MessageAdmin
from pai_threads.admin.runs import RunAdmin
from pai_threads.admin.steps import StepAdmin
from pai_threads.admin.threads import ThreadAdmin

__all__ = [
    "PRIVATE_PERMISSION",
    "FileAdmin",
    "MessageAdmin",
    "PendingActionAdmin",
    "QueueItemAdmin",
    "ReadOnlyAdmin",
    "RunAdmin",
    "RunAttemptAdmin",
    "StepAdmin",
    "ThreadAdmin",
    "can_see_private",
]
