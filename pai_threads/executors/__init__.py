"""Executors: how a committed run reaches a worker.

``"thread"`` runs it on an in-process event loop (the embedded default); ``"celery"`` sends
it to Celery workers. Any other value is a dotted path to an :class:`Executor` class.
"""

from __future__ import annotations

from functools import cache

from django.utils.module_loading import import_string

from pai_threads.conf import pai_settings
from pai_threads.executors.base import Executor
from pai_threads.executors.gc_tuning import tune_gc

__all__ = ["Executor", "clear_cache", "get_executor", "tune_gc"]

_BUILTIN = {
    "thread": "pai_threads.executors.thread.ThreadExecutor",
    "celery": "pai_threads.executors.celery.CeleryExecutor",
}


@cache
def get_executor() -> Executor:
    name = pai_settings.EXECUTOR
    executor_class = import_string(_BUILTIN.get(name, name))
    executor: Executor = executor_class()
    return executor


def clear_cache() -> None:
    get_executor.cache_clear()


pai_settings.on_reload(clear_cache)
