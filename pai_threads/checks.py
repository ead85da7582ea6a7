"""System checks: misconfiguration reported at start-up, with a hint."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register

from pai_threads.conf import pai_settings

__all__ = ["check_pai_settings"]


@register()
def check_pai_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    try:
        from pai_threads import registry

        agents = registry.agents()
    except Exception as exc:
        return [
            Error(
                f"PAI['AGENTS'] could not be loaded: {exc}",
                hint="Each entry is a dotted path to a define_agent() result.",
                id="pai.E001",
            )
        ]
    if not agents:
        errors.append(
            Error(
                "PAI['AGENTS'] is empty",
                hint="Add the dotted path of at least one agent.",
                id="pai.E002",
            )
        )
    executor = pai_settings.EXECUTOR
    if executor not in ("thread", "celery") and "." not in str(executor):
        errors.append(
            Error(
                f"PAI['EXECUTOR'] = {executor!r} is unknown",
                hint="Use 'thread', 'celery' or a dotted path.",
                id="pai.E003",
            )
        )
    if pai_settings.FILE_PROVIDER is not None:
        try:
            pai_settings.import_path("FILE_PROVIDER")
        except ImportError as exc:
            errors.append(
                Error(
                    f"PAI['FILE_PROVIDER'] could not be imported: {exc}",
                    hint="A dotted path to a pai_agents.files.FileProvider class, or None.",
                    id="pai.E004",
                )
            )
    if executor == "celery":
        from django.conf import settings

        layer = settings.CHANNEL_LAYERS.get("default", {}).get("BACKEND", "")
        if "InMemoryChannelLayer" in layer or not layer:
            errors.append(
                Warning(
                    "PAI['EXECUTOR'] is 'celery' but the channel layer is in-memory",
                    hint=(
                        "Runs execute in worker processes; browsers connected to the web "
                        "process only see them through channels_redis and the Redis replay "
                        "buffer (set REDIS_URL)."
                    ),
                    id="pai.W001",
                )
            )
    return errors
