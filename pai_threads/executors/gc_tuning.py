"""Garbage-collector tuning of PAI's long-lived processes (``PAI["GC_TUNING"]``).

A web process streaming to 50-200 chats tracks 190-270 thousand objects: Django's apps,
models and URL resolvers, agent definitions and their schemas, and what the first requests
and runs left (the replay buffers' events). With CPython's default thresholds (700, 10, 10),
full collections come often under load, and each walks all of them: 130-430 ms
with the interpreter's lock held, during which the event loop that writes every websocket
frame stands still (docs/benchmarks.md, "gc"). Raising the thresholds makes them rare: at
50-100 streams, event-loop lag p99 went from 132-155 ms to 7-15 ms and delivery p99 from
75-238 ms to 8-39 ms. Freezing what start-up allocated also takes those objects out of every
collection that still runs (and, before a prefork worker forks, out of the collector's
writes to pages its children share).

The cost: frozen objects are freed by reference counting as usual, but a reference cycle
among them is never collected (a collection just before the freeze keeps start-up's garbage
out), which is fine for definitions that live as long as the process anyway; and cyclic
garbage made later waits longer for its collection (more memory between collections).

Applied by :func:`pai_threads.asgi.start_background_services` (web processes) and by the
Celery worker signals of :mod:`pai_threads.tasks` (workers and each prefork child); never
on import, so management commands and test processes keep the interpreter's defaults.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
from collections.abc import Sequence

from django.core.exceptions import ImproperlyConfigured

__all__ = ["DEFAULT_THRESHOLDS", "gc_thresholds", "tune_gc"]

logger = logging.getLogger("pai.gc")

# What the benchmarks measured (docs/benchmarks.md): young collections every 50k net
# allocations, a middle one every 20 of them, a full one every 100 middle ones.
DEFAULT_THRESHOLDS: tuple[int, int, int] = (50_000, 20, 100)

_lock = threading.Lock()
# The process that applied the tuning: a forked child (a Celery prefork worker) applies it
# again, freezing what it allocated since the fork.
_tuned_pid: int | None = None


def gc_thresholds(setting: object) -> tuple[int, int, int] | None:
    """The thresholds a ``PAI["GC_TUNING"]`` value asks for, or None for ``False`` (leave the
    interpreter alone). Raises :class:`ImproperlyConfigured` for anything else than ``True``,
    ``False`` or three positive integers (``manage.py check`` reports it as ``pai.E016``)."""
    if setting is True:
        return DEFAULT_THRESHOLDS
    if setting is False:
        return None
    if (
        isinstance(setting, Sequence)
        and not isinstance(setting, str | bytes)
        and len(setting) == 3
        and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in setting)
    ):
        first, second, third = setting
        return (first, second, third)
    raise ImproperlyConfigured(
        f"PAI['GC_TUNING'] = {setting!r} must be True (thresholds {DEFAULT_THRESHOLDS}), "
        "False (no tuning), or three positive integers such as (50_000, 20, 100)"
    )


def tune_gc(setting: object = None) -> tuple[int, int, int] | None:
    """Apply ``setting`` (default: ``PAI["GC_TUNING"]``) to this process, once: collect,
    freeze the survivors (start-up's long-lived objects) and set the thresholds. Returns the
    thresholds set, or None when the setting is ``False`` or the process is already tuned.
    Thread-safe; a forked child tunes itself again."""
    global _tuned_pid
    if setting is None:
        from pai_threads.conf import pai_settings

        setting = pai_settings.GC_TUNING
    thresholds = gc_thresholds(setting)
    if thresholds is None:
        return None
    with _lock:
        if _tuned_pid == os.getpid():
            return None
        gc.collect()  # start-up's garbage is not frozen with the rest
        gc.freeze()
        gc.set_threshold(*thresholds)
        _tuned_pid = os.getpid()
    logger.info("gc tuned: %d objects frozen, thresholds %s", gc.get_freeze_count(), thresholds)
    return thresholds
