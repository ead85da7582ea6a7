"""``PAI`` settings: one dict, read lazily through :data:`pai_settings`.

Defaults live here and nowhere else; dotted paths are resolved on access; the cache is
dropped on ``setting_changed`` so ``override_settings(PAI=...)`` works in tests.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

__all__ = ["DEFAULTS", "pai_settings"]

DEFAULTS: dict[str, Any] = {
    # Dotted paths to AgentDefinition objects; the first is the default agent.
    "AGENTS": [],
    # "thread" (in-process, the embedded default) or "celery", or a dotted path to an Executor.
    "EXECUTOR": "thread",
    # Callable(request) -> pai_threads.identity.Identity | None; None means 401.
    "IDENTITY_RESOLVER": "pai_threads.identity.session_identity",
    # Seconds a claimed run's lease lasts without a heartbeat (heartbeats every third of it;
    # a cancel from another process is noticed at the next heartbeat).
    "LEASE_SECONDS": 30,
    # Runs still queued this long after creation are re-dispatched by the sweeper (a lost
    # broker message, an executor that died before claiming).
    "REDISPATCH_QUEUED_AFTER_SECONDS": 60,
    # Largest accepted JSON body of a send, in bytes.
    "MAX_MESSAGE_BYTES": 256 * 1024,
    # How many of the newest context-visible messages a model step sees (None: all). Keeps
    # a step's cost flat as threads grow; lifecycle hooks can build richer context.
    "CONTEXT_WINDOW_MESSAGES": 200,
    # Default and largest page sizes of list endpoints.
    "PAGE_SIZE": 50,
    "MAX_PAGE_SIZE": 200,
}


class PaiSettings:
    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in DEFAULTS:
            raise AttributeError(f"unknown PAI setting {name!r}")
        if name not in self._cache:
            user = getattr(settings, "PAI", {}) or {}
            self._cache[name] = user.get(name, DEFAULTS[name])
        return self._cache[name]

    def import_path(self, name: str) -> Any:
        value = getattr(self, name)
        return import_string(value) if isinstance(value, str) else value

    def reload(self) -> None:
        self._cache.clear()


pai_settings = PaiSettings()


@receiver(setting_changed)
def _reload(*, setting: str, **_: Any) -> None:
    if setting == "PAI":
        pai_settings.reload()
        from pai_threads import executors, registry

        registry.clear_cache()
        executors.clear_cache()
