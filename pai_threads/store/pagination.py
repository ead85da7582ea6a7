"""Opaque page tokens: signed, so clients can neither read nor forge positions."""

from __future__ import annotations

from django.core import signing

__all__ = ["InvalidPageToken", "decode_token", "encode_token"]

_SALT = "pai.page-token"


class InvalidPageToken(ValueError):
    pass


def encode_token(kind: str, position: int | str) -> str:
    return signing.dumps([kind, position], salt=_SALT, compress=False)


def decode_token(kind: str, token: str) -> int | str:
    try:
        token_kind, position = signing.loads(token, salt=_SALT)
    except (signing.BadSignature, ValueError, TypeError) as exc:
        raise InvalidPageToken("invalid page token") from exc
    if token_kind != kind or not isinstance(position, int | str):
        raise InvalidPageToken("page token belongs to another listing")
    return position
