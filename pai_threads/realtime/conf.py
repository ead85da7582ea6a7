"""Realtime settings (defaults and docs in ``pai_threads.conf.DEFAULTS``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from pai_threads.conf import pai_settings

__all__ = ["realtime_setting", "redis_url"]


def realtime_setting(name: str) -> Any:
    return getattr(pai_settings, name)


def redis_url() -> str:
    """The replay buffer's Redis URL, or "" for none."""
    return str(realtime_setting("REALTIME_REDIS_URL") or getattr(settings, "REDIS_URL", "") or "")
