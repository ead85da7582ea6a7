"""Identifiers: short, sortable-enough, prefixed random ids (``msg_…``, ``run_…``)."""

from __future__ import annotations

import secrets

__all__ = ["new_id"]


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"
