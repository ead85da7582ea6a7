"""The HTTP API."""

from pai_threads.api.views import api

__all__ = ["api"]
