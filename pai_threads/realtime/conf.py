"""Realtime settings (defaults and docs in ``pai_threads.conf.DEFAULTS``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from pai_threads.conf import pai_settings

__all__ = ["realtime_setting", "redis_url"]


# Read on every published batch: remembered until ``settings.PAI`` changes.
_values: dict[str, Any] = {}


def realtime_setting(name: str) -> Any:
    try:
        return _values[name]
    except KeyError:
        value = _values[name] = getattr(pai_settings, name)
        return value


pai_settings.on_reload(_values.clear)


def redis_url() -> str:
    """The replay buffer's Redis URL, or "" for none."""
    return str(realtime_setting("REALTIME_REDIS_URL") or getattr(settings, "REDIS_URL", "") or "")
