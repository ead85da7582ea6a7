"""Opaque page tokens: a continuation position only, never the query (LC-023)."""

from __future__ import annotations

import base64

__all__ = ["decode_page_token", "encode_page_token"]

_PREFIX = "pai-page:v1:"


def encode_page_token(position: int) -> str:
    return base64.urlsafe_b64encode(f"{_PREFIX}{position}".encode()).decode().rstrip("=")


def decode_page_token(token: str) -> int:
    try:
        padded = token + "=" * (-len(token) % 4)
        text = base64.urlsafe_b64decode(padded.encode()).decode()
        if not text.startswith(_PREFIX):
            raise ValueError(token)
        return int(text[len(_PREFIX) :])
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"invalid page token {token!r}") from exc
