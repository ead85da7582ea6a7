"""The JSON body parser of the API: depth-limited and typed (:func:`input_guard.loads`)."""

from __future__ import annotations

from typing import Any, cast

from django.http import HttpRequest
from ninja.parser import Parser

from pai_threads.services.input_guard import loads

__all__ = ["GuardedParser"]


class GuardedParser(Parser):
    """A body that is not JSON is 400, one nested too deeply 422, never a RecursionError.

    django-ninja wraps what this raises in ``HttpError(400)``; the envelope reads the typed
    cause back (:func:`pai_threads.api.envelope.describe`)."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        return cast(dict[str, Any], loads(request.body))
