"""Events of changes made outside an execution, kept here for existing imports.

The events are built by :mod:`pai_threads.events` and the thread's operations publish them
after commit (:func:`pai_threads.events.publish_after_commit`).
"""

from pai_threads.events.types import message_committed, run_status_of, thread_deleted

__all__ = ["message_committed", "run_status", "thread_deleted"]

run_status = run_status_of
