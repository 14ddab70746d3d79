"""Opaque cursors of the API's keyset pages: the sort key of the last row seen, base64-encoded.
A client hands back what it was given; anything else is 400 `invalid_filter`."""

from __future__ import annotations

import base64
import binascii

from api.errors import ApiError

_SEPARATOR = "|"


def cursor_encode(*parts: str) -> str:
    raw = _SEPARATOR.join(parts)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def cursor_decode(cursor: str, *, parts: int) -> list[str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise cursor_invalid() from None
    decoded = raw.split(_SEPARATOR)
    if len(decoded) != parts:
        raise cursor_invalid()
    return decoded


def cursor_invalid() -> ApiError:
    return ApiError(400, "invalid_filter", "cursor: not a cursor this API returned")
