"""Typed errors of the thread service; the HTTP layer maps each to one status code."""

from __future__ import annotations

__all__ = [
    "ActionConflict",
    "BadRequest",
    "FileTooLarge",
    "InvalidInput",
    "NotFound",
    "PaiError",
    "PayloadTooLarge",
    "RewriteRejected",
    "ServiceUnavailable",
    "ThreadBusy",
    "UnsupportedMediaType",
]


class PaiError(Exception):
    """Base class. ``code`` is stable and machine-readable; ``status`` is the HTTP status."""

    code = "pai_error"
    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(PaiError):
    """Missing, or belonging to another scope: the two are indistinguishable by design."""

    code = "not_found"
    status = 404


class InvalidInput(PaiError):
    code = "invalid_input"
    status = 422


class BadRequest(PaiError):
    """A request that cannot be read at all (malformed JSON or multipart framing)."""

    code = "bad_request"
    status = 400


class PayloadTooLarge(PaiError):
    """A message or body over its size limit; nothing was stored."""

    code = "payload_too_large"
    status = 413


class FileTooLarge(PaiError):
    """An upload over ``PAI["FILE_MAX_BYTES"]``; nothing was stored."""

    code = "file_too_large"
    status = 413


class ServiceUnavailable(PaiError):
    """The database (or another service the call needs) is unreachable: nothing was
    stored, and the same call (same message id) can be retried after ``retry_after``
    seconds."""

    code = "service_unavailable"
    status = 503

    def __init__(
        self,
        message: str = "The service is temporarily unavailable; retry shortly.",
        *,
        retry_after: int = 5,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UnsupportedMediaType(PaiError):
    """An upload whose media type ``PAI["FILE_MEDIA_TYPES"]`` does not accept."""

    code = "unsupported_media_type"
    status = 415


class ThreadBusy(PaiError):
    """The thread has an active run and the send policy rejects concurrent input."""

    code = "thread_busy"
    status = 409


class ActionConflict(PaiError):
    """A pending action was already answered (or cancelled): accepted once only."""

    code = "action_conflict"
    status = 409


class RewriteRejected(PaiError):
    """``prepare_history_rewrite`` raised or returned an invalid patch: nothing changed.

    The message is generic; the detail goes to ``on_runtime_error`` only (LC-158)."""

    code = "rewrite_rejected"
    status = 409

    def __init__(self, message: str = "The history rewrite was rejected.") -> None:
        super().__init__(message)
