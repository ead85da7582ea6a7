"""Fixtures for the lifecycle unit tests (builders live in lifecycle_support)."""

from __future__ import annotations

from lifecycle_support import world

__all__ = ["world"]
