"""Thread head changes clients see live: ``thread.updated``.

The operations publish it themselves (:func:`pai_threads.services.rename_thread`,
``set_archived``, rewrites, titles); kept here for existing imports.
"""

from pai_threads.events.types import thread_updated
from pai_threads.services import rename_thread

__all__ = ["rename_thread", "thread_updated"]
