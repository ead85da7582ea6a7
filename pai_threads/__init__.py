"""PAI threads: durable threads, runs and their transport, as a Django app."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pai_threads.services.trusted import TrustedThread, trusted_thread

__all__ = ["TrustedThread", "trusted_thread"]


def __getattr__(name: str) -> Any:
    # Lazy: importing the app package must not import its models before apps are ready.
    if name in __all__:
        from pai_threads.services import trusted

        return getattr(trusted, name)
    raise AttributeError(f"module 'pai_threads' has no attribute {name!r}")
